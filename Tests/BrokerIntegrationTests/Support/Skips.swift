import Foundation
import XCTest

/// A test that cannot run here for want of something outside the code: a Debian package, root, the test IdP's venv, a
/// network namespace. Under CI (`CI=true`) that fails the test, naming what is missing: CI installs everything, so a
/// green run means every test ran. Elsewhere the test is skipped, and the run ends with a list of what was skipped and
/// why (`SkipSummary`). Throw what it returns: `throw missing("…")`.
func missing(_ what: String, file: StaticString = #filePath, line: UInt = #line) -> XCTSkip {
    if ProcessInfo.processInfo.environment["CI"] == "true" {
        XCTFail("missing under CI=true (scripts/install-deps.sh and scripts/test.sh provide it): \(what)", file: file, line: line)
    }
    SkipSummary.shared.note(what)
    return XCTSkip(what, file: file, line: line)
}

/// Prints, when the test bundle finishes, each reason tests were skipped for and how many were.
final class SkipSummary: NSObject, XCTestObservation, @unchecked Sendable {
    static let shared: SkipSummary = {
        let summary = SkipSummary()
        XCTestObservationCenter.shared.addTestObserver(summary)
        return summary
    }()

    private let lock = NSLock()
    private var reasons: [String: Int] = [:]

    func note(_ reason: String) {
        lock.withLock { reasons[reason, default: 0] += 1 }
    }

    func testBundleDidFinish(_ testBundle: Bundle) {
        let counted = lock.withLock { reasons }
        guard !counted.isEmpty else { return }
        print("Skipped for what this machine lacks (\(counted.values.reduce(0, +)) tests):")
        for (reason, count) in counted.sorted(by: { $0.key < $1.key }) { print("  \(count) × \(reason)") }
    }
}
