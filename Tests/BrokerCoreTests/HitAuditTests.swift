import BrokerCore
import XCTest

/// A caller's count of its cache hits for the audit (`HitAudit`): one tally per request and window, repeats of a
/// remembered answer counted by its number, every hit counted once.
final class HitAuditTests: XCTestCase {
    private func subject(_ n: Int) -> HitAudit.Subject {
        HitAudit.Subject(clientId: "client", homeAccountId: "account-\(n)", username: "user\(n)@example.com",
                         scopes: ["scope-\(n % 3)", "offline_access"])
    }

    func testHitsOfARequestAreOneTallyAndEveryHitIsCounted() {
        var audit = HitAudit()
        for round in 0..<5 {
            for n in 0..<100 { XCTAssertTrue(audit.add(subject(n), number: 0, at: 1_000 + Int64(round)).isEmpty) }
        }
        XCTAssertEqual(audit.due, 1_000 + HitAudit.window)
        let tallies = audit.take()
        XCTAssertEqual(tallies.count, 100)
        XCTAssertEqual(Set(tallies.map(\.subject)), Set((0..<100).map(subject)))
        XCTAssertTrue(tallies.allSatisfy { $0.count == 5 && $0.first == 1_000 && $0.last == 1_004 })
        XCTAssertNil(audit.due, "nothing held after take")
        XCTAssertTrue(audit.take().isEmpty)
    }

    func testARepeatIsCountedByItsAnswersNumberLastOrNot() {
        var audit = HitAudit()
        for n in 1...50 { _ = audit.add(subject(n), number: n, at: 10) }
        XCTAssertTrue(audit.countRepeat(number: 50, at: 11), "the answer counted last")
        XCTAssertTrue(audit.countRepeat(number: 7, at: 12), "another remembered answer")
        XCTAssertTrue(audit.countRepeat(number: 7, at: 13))
        XCTAssertFalse(audit.countRepeat(number: 51, at: 13), "a number never counted: add it")
        XCTAssertFalse(audit.countRepeat(number: 0, at: 13), "0 is no remembered answer")
        let counts = Dictionary(uniqueKeysWithValues: audit.take().map { ($0.number, $0.count) })
        XCTAssertEqual(counts[50], 2)
        XCTAssertEqual(counts[7], 3)
        XCTAssertEqual(counts.values.reduce(0, +), 50 + 3)
        XCTAssertFalse(audit.countRepeat(number: 7, at: 14), "the numbers go with the tallies taken")
    }

    func testAWindowEndsAfterItsSecondsAndHandsItsTalliesOver() {
        var audit = HitAudit()
        _ = audit.add(subject(1), number: 1, at: 100)
        XCTAssertTrue(audit.countRepeat(number: 1, at: 100 + HitAudit.window - 1))
        XCTAssertFalse(audit.countRepeat(number: 1, at: 100 + HitAudit.window), "the window has ended")
        let finished = audit.add(subject(1), number: 1, at: 100 + HitAudit.window)
        XCTAssertEqual(finished.map(\.count), [2])
        XCTAssertEqual(audit.take().map(\.count), [1], "the hit that ended the window starts the next")
    }

    func testAFullWindowEndsEarly() {
        var audit = HitAudit()
        for n in 0..<HitAudit.capacity { XCTAssertTrue(audit.add(subject(n), number: 0, at: 5).isEmpty) }
        XCTAssertEqual(audit.add(subject(HitAudit.capacity), number: 0, at: 5).count, HitAudit.capacity)
        XCTAssertEqual(audit.take().count, 1)
    }
}
