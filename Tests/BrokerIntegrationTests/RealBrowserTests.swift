import BrokerProtocol
import Foundation
import XCTest

/// One interactive sign-in in a real browser: Debian's chromium, headless, driven by selenium through Debian's
/// chromium-driver (Tests/idp/chromium_browser.py as $BROWSER). brokerd hands it the authorize URL; chromium shows
/// the test IdP's login page, the script fills it in, and chromium itself follows the redirects to brokerd's loopback
/// redirect. Every other interactive test uses the scripted browser (Tests/idp/fake_browser.py), which speaks HTTP
/// itself; this one proves the flow with a browser's own cookies, redirects and form posting.
final class RealBrowserTests: XCTestCase {
    private static let script = TestIdP.root + "/Tests/idp/chromium_browser.py"

    override func setUpWithError() throws {
        for path in ["/usr/bin/chromium", "/usr/bin/chromedriver"] where !FileManager.default.isExecutableFile(atPath: path) {
            throw missing("\(path) is missing (apt-get install chromium chromium-driver python3-selenium)")
        }
        guard try runCommand("/usr/bin/python3", ["-c", "import selenium"]).status == 0 else {
            throw missing("python3-selenium is missing")
        }
    }

    func testSignInWithChromiumLandsOnTheLoopbackRedirect() throws {
        let idp = try TestIdP()
        let daemon = try Daemon(config: idp.brokerConfig())
        var environment = idp.browserEnvironment()
        environment["BROWSER"] = Self.script
        daemon.environment = environment
        try daemon.start()

        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        let browserLog = (try? String(contentsOfFile: idp.directory.path + "/browser.log", encoding: .utf8)) ?? ""
        XCTAssertEqual(login.status, 0, login.stderr + browserLog + daemon.log)
        XCTAssertTrue(browserLog.contains("chromium login form at \(idp.http)/accounts/login/"), browserLog)
        XCTAssertTrue(browserLog.contains("chromium landed on http://127.0.0.1:"), browserLog)
        XCTAssertTrue(browserLog.contains(": Signed in"), browserLog)
        XCTAssertFalse(browserLog.contains("code="), "the browser log holds no authorization code")
        let signedIn = try decode(TokenResult.self, login.stdout)
        XCTAssertEqual(signedIn.account.username, "alice")
        XCTAssertEqual(try idp.tokenRequests("authorization_code"), 1)

        let token = try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(try decode(TokenResult.self, token.stdout).accessToken, signedIn.accessToken, "then from the cache")
    }
}
