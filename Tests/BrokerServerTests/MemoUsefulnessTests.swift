@testable import BrokerServer
import XCTest

/// When a connection's memo of answers is consulted: always, until it has kept two fillings' worth of answers and served
/// none; then one line in `probeEvery`, until it serves one again.
final class MemoUsefulnessTests: XCTestCase {
    /// Lines consulted out of `lines`, each consulted line's answer kept (a cache hit) and never served.
    private func consulted(_ lines: Int, by usefulness: inout MemoUsefulness) -> Int {
        var count = 0
        for _ in 0..<lines where usefulness.consultsNextLine() {
            count += 1
            usefulness.kept()
        }
        return count
    }

    func testAMemoThatServesIsAlwaysConsulted() {
        var usefulness = MemoUsefulness()
        for line in 0..<10 * MemoUsefulness.giveUpAfter {
            XCTAssertTrue(usefulness.consultsNextLine(), "line \(line)")
            usefulness.kept()
            if line % (MemoUsefulness.giveUpAfter - 1) == 0 { usefulness.served() }
        }
    }

    func testAMemoThatServesNothingIsConsultedForOneLineInSixteen() {
        var usefulness = MemoUsefulness()
        XCTAssertEqual(consulted(MemoUsefulness.giveUpAfter, by: &usefulness), MemoUsefulness.giveUpAfter)
        XCTAssertFalse(usefulness.consultsNextLine(), "the line after two fillings served from neither")
        let lines = 100 * MemoUsefulness.probeEvery
        let probes = consulted(lines, by: &usefulness)
        XCTAssertEqual(probes, lines / MemoUsefulness.probeEvery)
    }

    func testOneAnswerServedMakesEveryLineCountAgain() {
        var usefulness = MemoUsefulness()
        _ = consulted(MemoUsefulness.giveUpAfter + 5, by: &usefulness)
        XCTAssertFalse(usefulness.consultsNextLine())
        usefulness.served()  // a probe's answer, or the answer kept last, served a repeat
        XCTAssertEqual(consulted(MemoUsefulness.giveUpAfter, by: &usefulness), MemoUsefulness.giveUpAfter)
        XCTAssertFalse(usefulness.consultsNextLine(), "and it gives up again after two more fillings")
    }

    func testLinesThatAreNotHitsDoNotCountAgainstTheMemo() {
        var usefulness = MemoUsefulness()
        // Consulted, but nothing kept (an error, a miss that went to a task): the memo was not shown useless.
        for line in 0..<10 * MemoUsefulness.giveUpAfter { XCTAssertTrue(usefulness.consultsNextLine(), "line \(line)") }
    }
}
