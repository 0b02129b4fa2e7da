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
