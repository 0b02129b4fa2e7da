import Foundation
import XCTest

/// Polls until `condition` holds, for at most `timeout` seconds, and fails with `what` when it never does. It waits
/// for a state to be reached (a request counted, a line logged); it never asserts how long anything took.
func waitFor(_ what: String, timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line,
             _ condition: () throws -> Bool) rethrows {
    let deadline = Date().addingTimeInterval(timeout)
    repeat {
        if try condition() { return }
        usleep(50_000)
    } while Date() < deadline
    if try condition() { return }
    XCTFail("timed out waiting for \(what)", file: file, line: line)
}

/// Waits until `daemon`'s background refresh has finished `count` more checks than it had when called: what a test
/// waits for to show that a check came and did nothing, instead of sleeping for as long as it hopes checks take.
func waitForRefreshChecks(_ daemon: Daemon, count: Int, file: StaticString = #filePath, line: UInt = #line) {
    func checks() -> Int { daemon.log.components(separatedBy: "background refresh check done").count - 1 }
    let before = checks()
    waitFor("\(count) more background refresh checks", file: file, line: line) { checks() >= before + count }
}
