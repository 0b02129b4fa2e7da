import Foundation
import XCTest

/// The Python client (clients/python) against the real daemon and the real test IdP: its own unittest suite,
/// run with the system Python (standard library only).
final class PythonClientTests: XCTestCase {
    func testPythonClientFullCycle() throws {
        let idp = try TestIdP()
        let daemon = try Daemon(config: idp.brokerConfig().replacingOccurrences(of: "open_browser = \"always\"",
                                                                               with: "open_browser = \"never\""))
        try daemon.start()
        var environment = ProcessInfo.processInfo.environment
        environment["BROKERD_SOCKET"] = daemon.socket
        environment["BROKERD_TEST_CLIENT_ID"] = testClient
        environment["BROKERD_TEST_AUTHORITY"] = idp.http
        environment["BROKERD_TEST_APPROVE_URL"] = idp.http + "/test/approve-device?user_code={code}&username=alice"
        let result = try runCommand("/usr/bin/python3", [TestIdP.root + "/clients/python/test_client.py", "-v"],
                                    environment: environment)
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr + daemon.log)
        XCTAssertTrue(result.stderr.contains("\nOK"), result.stderr)
        XCTAssertFalse(result.stderr.contains("skipped"), "the Python tests ran: \(result.stderr)")
    }
}
