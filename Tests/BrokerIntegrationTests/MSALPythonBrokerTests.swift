import Foundation
import XCTest

/// The real client: unmodified msal-python 1.39 with `enable_broker_on_linux=True` and pymsalruntime 0.20.7 (PyPI),
/// on a private session bus with an unlocked gnome-keyring (pymsalruntime's own cache), against brokerd's D-Bus front
/// end and the Entra emulator. The app is Tests/dbus/msal_app.py; its report carries token hashes, never tokens.
final class MSALPythonBrokerTests: XCTestCase {
    private var bus: PrivateSessionBus!
    private var python = ""

    override func setUpWithError() throws {
        python = try msalPython()
        bus = try PrivateSessionBus()
        try bus.startSecretService()
    }

    override func tearDown() {
        bus = nil
    }

    private func broker(_ entra: TestEntra) throws -> Daemon {
        let daemon = try Daemon(config: entra.brokerConfig)
        daemon.environment = ["BROWSER": TestIdP.fakeBrowser, "IDP_BROWSER_LOG": entra.directory.path + "/browser.log",
                              "DBUS_SESSION_BUS_ADDRESS": bus.address]
        daemon.extraArguments = ["--dbus-broker"]
        try daemon.start()
        return daemon
    }

    /// Runs the msal-python app with these steps; its report, one entry per step.
    private func app(_ entra: TestEntra, client: String, _ steps: [String], file: StaticString = #filePath,
                     line: UInt = #line) throws -> [[String: Any]] {
        let result = try runCommand(python, [TestIdP.root + "/Tests/dbus/msal_app.py", entra.http, client] + steps,
                                    environment: bus.environment)
        XCTAssertEqual(result.status, 0, result.stderr, file: file, line: line)
        return (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [[String: Any]] ?? []
    }

    private func sha256(_ text: String) throws -> String {
        let digest = try runCommand("/usr/bin/sha256sum", [], stdin: text)
        return String(digest.stdout.prefix(64))
    }

    func testSignInThenSilentFromTheCacheAndByRefreshAndSingleSignOnWithANativeApp() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra)
        try entra.control("/test/next-signin?username=alice@contoso.example")
        let mail = "https://graph.microsoft.com/Mail.Read"
        let report = try app(entra, client: TestEntra.famA, [
            "interactive|\(TestEntra.graph)|alice@contoso.example", "silent|\(TestEntra.graph)", "silent|\(mail)", "accounts",
        ])
        XCTAssertEqual(report.count, 4, "\(report) \(daemon.log)")
        guard report.count == 4 else { return }
        let (signIn, cached, newScope, accounts) = (report[0], report[1], report[2], report[3])
        XCTAssertEqual(signIn["token_source"] as? String, "broker", "\(signIn)")
        XCTAssertEqual(signIn["preferred_username"] as? String, "alice@contoso.example")
        XCTAssertEqual(cached["token_source"] as? String, "cache", "msal's own cache: no call to the broker")
        XCTAssertEqual(cached["access_token_sha256"] as? String, signIn["access_token_sha256"] as? String)
        XCTAssertEqual(newScope["token_source"] as? String, "broker", "a new scope goes to the broker: \(newScope)")
        XCTAssertNotEqual(newScope["access_token_sha256"] as? String, signIn["access_token_sha256"] as? String)
        XCTAssertEqual(accounts["usernames"] as? [String], ["alice@contoso.example"])

        let grants = try entra.tokenRequests().compactMap { $0["grant_type"] as? String }
        XCTAssertEqual(grants, ["authorization_code", "refresh_token"], "one sign-in, then the new scope by refresh")
        // With nobody signed in, msal's interactive call first tries a silent sign-in (getAccounts, then
        // acquireTokenSilently with no account), gets InteractionRequired (status 2) and falls back to interactive.
        let calls = daemon.log.split(separator: "\n").filter { $0.contains("D-Bus request") }
            .compactMap { $0.split(separator: " ").first { $0.hasPrefix("method=") } }.map(String.init)
        XCTAssertEqual(Array(calls.prefix(3)), ["method=getAccounts", "method=acquireTokenSilently",
                                                "method=acquireTokenInteractively"], daemon.log)

        // Single sign-on with a brokerd-native app (the socket API): the token the msal-python app got.
        let native = try daemon.ctl(["token", "--client-id", TestEntra.famA, "--authority",
                                     "https://login.microsoftonline.com/common", "--scope", mail])
        XCTAssertEqual(native.status, 0, native.stderr)
        XCTAssertEqual(try sha256(native.stdout.trimmingCharacters(in: .whitespacesAndNewlines)),
                       newScope["access_token_sha256"] as? String)
    }

    /// msal's remove_account is local to the app with the real client (reference: libmsalruntime's signout_silently
    /// never sends removeAccount): the app forgets the account, brokerd keeps it, and another app of the user still
    /// gets a token for it. Should pymsalruntime ever send removeAccount, this test says so.
    func testRemoveAccountIsLocalToTheAppAndBrokerdKeepsTheAccount() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra)
        try entra.control("/test/next-signin?username=alice@contoso.example")
        let report = try app(entra, client: TestEntra.famA, [
            "interactive|\(TestEntra.graph)|alice@contoso.example", "remove", "accounts",
        ])
        XCTAssertEqual(report.count, 3, "\(report) \(daemon.log)")
        XCTAssertEqual(report.last?["usernames"] as? [String], [], "the app forgot the account: \(report)")
        XCTAssertFalse(daemon.log.contains("method=removeAccount"), "pymsalruntime now sends removeAccount: \(daemon.log)")
        let status = try daemon.ctl(["status", "--json"])
        XCTAssertTrue(status.stdout.contains(#""accounts":1"#), status.stdout)
        let other = try daemon.ctl(["token", "--client-id", TestEntra.famB, "--authority",
                                    "https://login.microsoftonline.com/common", "--scope", TestEntra.graph])
        XCTAssertEqual(other.status, 0, "another app of the family gets its token: \(other.stderr)")
    }

    /// A claims challenge from a resource reaches brokerd through msal and pymsalruntime, and brokerd takes it to the
    /// token endpoint (with the client capabilities merged in): the emulator logs a refresh that carries claims.
    func testAClaimsChallengeGoesThroughToTheTokenEndpoint() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra)
        try entra.control("/test/next-signin?username=alice@contoso.example")
        let claims = #"{"access_token":{"nbf":{"essential":true,"value":"1700000000"}}}"#
        let report = try app(entra, client: TestEntra.famA, [
            "interactive|\(TestEntra.graph)|alice@contoso.example", "claims|\(TestEntra.graph)|\(claims)",
        ])
        XCTAssertEqual(report.count, 2, "\(report) \(daemon.log)")
        // Failed twice under load with the claims step's result null: the daemon's log says what brokerd answered.
        XCTAssertEqual(report.last?["token_source"] as? String, "broker", "\(report) \(daemon.log)")
        XCTAssertNotNil(report.last?["access_token_sha256"], "\(report)")
        let refresh = try entra.tokenRequests().last { $0["grant_type"] as? String == "refresh_token" }
        XCTAssertEqual(refresh?["has_claims"] as? Bool, true, "\(String(describing: refresh))")
        let sent = (refresh?["claims"] as? [String: Any])?["access_token"] as? [String: Any]
        XCTAssertNotNil(sent?["nbf"], "the challenge: \(String(describing: refresh))")
        XCTAssertNotNil(sent?["xms_cc"], "merged with the client capabilities: \(String(describing: refresh))")
    }

    /// With no broker on the bus, msal-python turns the broker off by itself (and would use its own browser flow).
    func testWithoutBrokerdMSALFallsBackByItself() throws {
        let entra = try TestEntra()
        let without = try app(entra, client: TestEntra.famA, ["broker"])
        XCTAssertEqual(without.first?["enabled"] as? Bool, false, "\(without)")
        let daemon = try broker(entra)
        let with = try app(entra, client: TestEntra.famA, ["broker"])
        XCTAssertEqual(with.first?["enabled"] as? Bool, true, "\(with) \(daemon.log)")
    }
}
