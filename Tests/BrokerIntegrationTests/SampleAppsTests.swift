import Foundation
import XCTest

/// The two sample apps of Examples/ (Swift profile viewer, Python mail-folder counter), run as a user would run
/// them, against the real daemon and the real test IdP: one sign-in in the first gives the second its token
/// silently (single sign-on through the broker).
final class SampleAppsTests: XCTestCase {
    func testSigningInWithTheSwiftAppMakesThePythonAppSilent() throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)   // $BROWSER is the scripted browser, signing in as alice
        var environment = ProcessInfo.processInfo.environment
        environment["BROKERD_SOCKET"] = daemon.socket
        environment["BROKERD_EXAMPLE_CLIENT_ID"] = testClient
        environment["BROKERD_EXAMPLE_AUTHORITY"] = idp.http
        let mailCount = TestIdP.root + "/Examples/python-mail-count/mail_count.py"

        // Before anyone signed in, the mail app cannot get a token without interaction.
        let before = try runCommand("/usr/bin/python3", [mailCount, "--no-interactive"], environment: environment)
        XCTAssertEqual(before.status, 4, before.stdout + before.stderr)

        // The Swift app signs in (browser flow), asking consent for mail.read on the way.
        let profile = try runCommand(Binaries.profileExample, [], environment: environment)
        XCTAssertEqual(profile.status, 0, profile.stdout + profile.stderr + daemon.log)
        XCTAssertTrue(profile.stdout.contains("Signed in as Alice Anderson <alice@example.test>"), profile.stdout)
        XCTAssertTrue(profile.stdout.contains("token source: interactive"), profile.stdout)
        let signIns = try idp.tokenRequests("authorization_code")
        XCTAssertEqual(signIns, 1)

        // The Python app, same registration, other scope: silent, no sign-in of its own.
        let mail = try runCommand("/usr/bin/python3", [mailCount, "--no-interactive"], environment: environment)
        XCTAssertEqual(mail.status, 0, mail.stdout + mail.stderr + daemon.log)
        XCTAssertTrue(mail.stdout.contains("alice has 3 mail folders (Inbox 12, Archive 40, Sent 7)"), mail.stdout)
        XCTAssertTrue(mail.stdout.contains("token source: refresh") || mail.stdout.contains("token source: cache"), mail.stdout)
        XCTAssertEqual(try idp.tokenRequests("authorization_code"), signIns, "no second sign-in")
        XCTAssertEqual(try idp.tokenRequests("urn:ietf:params:oauth:grant-type:device_code"), 0)

        // Both again: straight from the broker's cache.
        let profileAgain = try runCommand(Binaries.profileExample, ["--no-interactive"], environment: environment)
        XCTAssertEqual(profileAgain.status, 0, profileAgain.stderr)
        XCTAssertTrue(profileAgain.stdout.contains("token source: cache"), profileAgain.stdout)
        let mailAgain = try runCommand("/usr/bin/python3", [mailCount, "--no-interactive"], environment: environment)
        XCTAssertTrue(mailAgain.stdout.contains("token source: cache"), mailAgain.stdout)
        // Neither app prints a token.
        let exported = try daemon.ctl(["export", "-"]).stdout
        let cache = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(exported.utf8)) as? [String: Any])
        let secrets = ["AccessToken", "RefreshToken"].flatMap { section in
            (cache[section] as? [String: [String: Any]] ?? [:]).values.compactMap { $0["secret"] as? String }
        }
        XCTAssertGreaterThanOrEqual(secrets.count, 2, "an access and a refresh token at least")
        for output in [before, profile, mail, profileAgain, mailAgain] {
            for secret in secrets { XCTAssertFalse((output.stdout + output.stderr).contains(secret), "a sample app printed a token") }
        }
    }
}
