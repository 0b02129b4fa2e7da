import OAuth
import Synchronization
import XCTest

/// HostBackoff and HostClocks on an injected clock: the backoff's growth, its end, and the reading of `Date` headers.
final class HostBackoffTests: XCTestCase {
    /// A clock the test moves.
    final class Clock: Sendable {
        let seconds = Atomic<Int64>(1_000)
        func advance(_ by: Int64) { seconds.add(by, ordering: .relaxed) }
        var now: Int64 { seconds.load(ordering: .relaxed) }
    }

    func testAFailedHostBacksOffLongerWhileItKeepsFailing() {
        let clock = Clock()
        let backoff = HostBackoff(maximumSeconds: 60, clock: { clock.now })
        XCTAssertNil(backoff.blocked("idp.example"))
        var waits: [Int64] = []
        for _ in 0..<7 {
            let blocked = backoff.failed("idp.example", why: "connection refused")
            waits.append(blocked.retryAfter)
            XCTAssertEqual(backoff.blocked("idp.example")?.retryAfter, blocked.retryAfter)
            XCTAssertNil(backoff.blocked("other.example"), "only the host that failed")
            clock.advance(blocked.retryAfter)
            XCTAssertNil(backoff.blocked("idp.example"), "tried again once the wait is over")
        }
        XCTAssertEqual(waits, [2, 4, 8, 16, 32, 60, 60])
        XCTAssertEqual(backoff.unreachableHosts().first?.failures, 7)
    }

    func testRequestsAlreadyOnTheirWayCountAsOneFailure() {
        let clock = Clock()
        let backoff = HostBackoff(clock: { clock.now })
        let first = backoff.failed("idp.example", why: "timed out")
        clock.advance(1)
        let second = backoff.failed("idp.example", why: "timed out")
        XCTAssertEqual(first.failures, 1)
        XCTAssertEqual(second.failures, 1, "a burst of callers does not grow the backoff by itself")
        XCTAssertEqual(second.retryAfter, first.retryAfter - 1)
    }

    func testAnAnswerOrANetworkChangeEndsTheBackoff() {
        let clock = Clock()
        let backoff = HostBackoff(clock: { clock.now })
        backoff.failed("a.example", why: "no route to host")
        backoff.failed("b.example", why: "no route to host")
        backoff.reached("a.example")
        XCTAssertNil(backoff.blocked("a.example"))
        XCTAssertNotNil(backoff.blocked("b.example"))
        XCTAssertEqual(backoff.reset(), ["b.example"])
        XCTAssertNil(backoff.blocked("b.example"))
        XCTAssertTrue(backoff.unreachableHosts().isEmpty)
        XCTAssertEqual(backoff.failed("b.example", why: "again").failures, 1, "counting starts over")
    }

    func testDateHeaders() {
        XCTAssertEqual(HostClocks.parseIMFFixdate("Sun, 06 Nov 1994 08:49:37 GMT"), 784_111_777)
        XCTAssertEqual(HostClocks.parseIMFFixdate("Thu, 01 Jan 1970 00:00:00 GMT"), 0)
        XCTAssertEqual(HostClocks.parseIMFFixdate("Tue, 29 Feb 2028 23:59:59 GMT"), 1_835_481_599)
        for bad in ["", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC",
                    "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT"] {
            XCTAssertNil(HostClocks.parseIMFFixdate(bad), bad)
        }
        let clocks = HostClocks(wallClock: { 784_111_777 - 400 })
        clocks.note(host: "idp.example", dateHeader: "Sun, 06 Nov 1994 08:49:37 GMT")
        clocks.note(host: "other.example", dateHeader: "not a date")
        XCTAssertEqual(clocks.all().map(\.host), ["idp.example"])
        XCTAssertEqual(clocks.all().first?.skewSeconds, 400, "the host's clock is 400 s ahead of ours")
    }
}
