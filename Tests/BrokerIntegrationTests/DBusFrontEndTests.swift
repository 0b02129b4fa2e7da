import Foundation
import XCTest

private func JSONStringQuote(_ text: String) -> String {
    String(decoding: try! JSONSerialization.data(withJSONObject: [text]), as: UTF8.self).dropFirst().dropLast().description
}

/// brokerd's com.microsoft.identity.broker1 front end on a private `dbus-daemon --session`, called with busctl (a real
/// D-Bus client) in the request shapes msal-python's pymsalruntime sends (shared/reference/linux-broker-dbus.md),
/// answered from a real daemon and its cache.
final class DBusFrontEndTests: XCTestCase {
    private var bus: PrivateSessionBus!
    private var busAddress: String { bus.address }
    private var directory: TemporaryDirectory { bus.directory }
    static let tenant = "72f988bf-0000-0000-0000-000000000001"
    static let alice = CacheFixture.alice

    override func setUpWithError() throws {
        bus = try PrivateSessionBus()
    }

    override func tearDown() {
        bus = nil
    }

    private func daemon(dbus: Bool = true) throws -> Daemon {
        let daemon = try Daemon(config: "background_refresh = false\nallow_root = true\n" + (dbus ? "" : "dbus_broker = false\n"))
        daemon.environment["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        try daemon.start()
        return daemon
    }

    /// A JWT with the claims MSAL clients read (unsigned: clients do not check it, and brokerd does not sign).
    private func idToken(_ username: String) -> String {
        func part(_ json: String) -> String {
            Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        return part(#"{"alg":"none","typ":"JWT"}"#) + "." + part("""
            {"preferred_username":"\(username)","name":"Alice","oid":"00000000-0000-0000-0000-0000000a11ce","tid":"\(Self.tenant)"}
            """) + "."
    }

    private func importAlice(_ daemon: Daemon) throws {
        var json = CacheFixture.twoAppsTwoAccounts.json
        json = json.replacingOccurrences(of: "fake-idt-alice-a", with: idToken("Alice@Contoso.example"))
        let file = directory.path + "/cache.json"
        try json.write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try daemon.ctl(["import", file])
        XCTAssertEqual(imported.status, 0, imported.stderr)
    }

    /// One broker method through busctl: the answer's JSON object, or nil when the call failed (stderr in `failure`).
    private func call(_ method: String, _ request: String, failure: inout String) throws -> [String: Any]? {
        let result = try runCommand("/usr/bin/busctl", [
            "--address=\(busAddress)", "--json=short", "call", "com.microsoft.identity.broker1",
            "/com/microsoft/identity/broker1", "com.microsoft.identity.Broker1", method, "sss", "0.0",
            "fake-correlation-id", request,
        ])
        failure = result.stderr
        guard result.status == 0,
              let reply = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let text = (reply["data"] as? [String])?.first else { return nil }
        return try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }

    private func call(_ method: String, _ request: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        var failure = ""
        for _ in 0..<200 {  // brokerd may still be taking the name
            if let answer = try call(method, request, failure: &failure) { return answer }
            usleep(25_000)
        }
        XCTFail("\(method) failed: \(failure)", file: file, line: line)
        return [:]
    }

    private func silentRequest(account: String?, client: String = "client-a",
                               authority: String = "https://login.microsoftonline.com/\(tenant)",
                               scope: String = "User.Read") -> String {
        let accountJSON = account.map { #"{"homeAccountId":"\#($0)","environment":"login.microsoftonline.com","username":"alice@contoso.example"}"# } ?? "null"
        return """
            {"authParameters":{"accessTokenToRenew":"","account":\(accountJSON),"authority":"\(authority)",\
            "authorizationType":1,"clientId":"\(client)","decodedClaims":"","isSignIn":\(account == nil),"popParams":null,\
            "redirectUri":"https://login.microsoftonline.com/common/oauth2/nativeclient","requestedScopes":["\(scope)"],\
            "username":"","uxContextHandle":-1}}
            """
    }

    /// acquireTokenInteractively as pymsalruntime sends it (authorizationType 6, `username` the login hint).
    private func interactiveRequest(client: String, username: String = "", claims: String = "") -> String {
        """
        {"authParameters":{"accessTokenToRenew":"","account":null,"authority":"https://login.microsoftonline.com/common",\
        "authorizationType":6,"clientId":"\(client)","decodedClaims":\(JSONStringQuote(claims)),"isSignIn":true,\
        "parentWindow":{"handle":1},"popParams":null,"redirectUri":"https://login.microsoftonline.com/common/oauth2/nativeclient",\
        "requestedScopes":["\(TestEntra.graph)"],"username":"\(username)","uxContextHandle":-1},"parentWindowHandle":1}
        """
    }

    private func entraDaemon(_ entra: TestEntra, browser: String = TestIdP.fakeBrowser) throws -> Daemon {
        let daemon = try Daemon(config: entra.brokerConfig)
        daemon.environment = ["BROWSER": browser, "IDP_BROWSER_LOG": entra.directory.path + "/browser.log",
                              "DBUS_SESSION_BUS_ADDRESS": busAddress]
        daemon.extraArguments = ["--dbus-broker"]
        try daemon.start()
        return daemon
    }

    private func error(_ answer: [String: Any]) -> [String: Any]? {
        (answer["brokerTokenResponse"] as? [String: Any])?["error"] as? [String: Any]
    }

    func testPingVersionAndAnEmptyBroker() throws {
        let daemon = try daemon()
        XCTAssertEqual(try call("getLinuxBrokerVersion", "{}")["linuxBrokerVersion"] as? String, "0.1.0")
        let ping = try runCommand("/usr/bin/busctl", ["--address=\(busAddress)", "call", "com.microsoft.identity.broker1",
                                                     "/com/microsoft/identity/broker1", "org.freedesktop.DBus.Peer", "Ping"])
        XCTAssertEqual(ping.status, 0, ping.stderr)
        XCTAssertEqual((try call("getAccounts", #"{"clientId":"client-a","redirectUri":"client-a"}"#)["accounts"] as? [Any])?.count, 0)
        let silent = try XCTUnwrap(error(try call("acquireTokenSilently", silentRequest(account: nil))))
        XCTAssertEqual(silent["status"] as? Int, 2, "InteractionRequired: the client falls back to interactive")
        for key in ["errorCode", "tag", "context"] { XCTAssertNotNil(silent[key], key) }
        XCTAssertTrue(daemon.log.contains("method=acquireTokenSilently"), daemon.log)
        XCTAssertTrue(daemon.log.contains("client_exe=/usr/bin/busctl"), "the caller's executable is logged")
        let status = try daemon.ctl(["status", "--json"])
        XCTAssertTrue(status.stdout.contains(#""dbusBroker":"serving com.microsoft.identity.broker1 on the session bus""#), status.stdout)
    }

    func testAccountsAndACachedTokenAsMSALReadsThem() throws {
        let daemon = try daemon()
        try importAlice(daemon)
        let accounts = try XCTUnwrap(try call("getAccounts", #"{"clientId":"client-a","redirectUri":"client-a"}"#)["accounts"] as? [[String: Any]])
        let alice = try XCTUnwrap(accounts.first { $0["homeAccountId"] as? String == Self.alice })
        XCTAssertEqual(alice["environment"] as? String, "login.microsoftonline.com")
        XCTAssertEqual(alice["realm"] as? String, Self.tenant)
        XCTAssertEqual(alice["localAccountId"] as? String, "00000000-0000-0000-0000-0000000a11ce")
        XCTAssertEqual(alice["username"] as? String, "Alice@Contoso.example")
        let clientInfo = try XCTUnwrap(alice["clientInfo"] as? String)
        XCTAssertTrue(String(decoding: Data(base64Encoded: clientInfo + "==") ?? Data(), as: UTF8.self)
            .contains(#""utid":"\#(Self.tenant)""#), clientInfo)

        let answer = try call("acquireTokenSilently", silentRequest(account: Self.alice))
        let token = try XCTUnwrap(answer["brokerTokenResponse"] as? [String: Any], "\(answer.keys)")
        XCTAssertTrue(token["accessToken"] as? String == "fake-at-alice-a")
        XCTAssertEqual(token["accessTokenType"] as? Int, 0)
        XCTAssertEqual(token["expiresOn"] as? Int, 4_000_000_000_000, "epoch milliseconds")
        XCTAssertEqual(token["extendedExpiresOn"] as? Int, 4_000_000_000_000)
        XCTAssertEqual(token["clientInfo"] as? String, clientInfo)
        XCTAssertTrue((token["idToken"] as? String)?.hasPrefix("eyJ") == true)
        XCTAssertNil(token["grantedScopes"], "left out: the client refuses a list that misses a requested scope")

        // Two accounts for client-a (Alice and Bob): a silent sign-in without an account cannot pick one.
        XCTAssertEqual(error(try call("acquireTokenSilently", silentRequest(account: nil)))?["status"] as? Int, 2)
        // Bob removed from client-a: Alice is its only account, and a silent sign-in without an account gets hers.
        XCTAssertNotNil(try call("removeAccount", #"{"clientId":"client-a","account":{"homeAccountId":"\#(CacheFixture.bob)"}}"#))
        let defaultAnswer = try call("acquireTokenSilently", silentRequest(account: nil))
        XCTAssertTrue((defaultAnswer["brokerTokenResponse"] as? [String: Any])?["accessToken"] as? String == "fake-at-alice-a",
                      "the default account's token: \(defaultAnswer.keys)")
    }

    func testRemovalForOneAppKeepsTheOther() throws {
        let daemon = try daemon()
        try importAlice(daemon)
        XCTAssertNotNil(try call("removeAccount", #"{"clientId":"client-b","account":{"homeAccountId":"\#(Self.alice)"}}"#))
        let forB = try call("getAccounts", #"{"clientId":"client-b","redirectUri":"client-b"}"#)["accounts"] as? [[String: Any]]
        XCTAssertEqual(forB?.contains { $0["homeAccountId"] as? String == Self.alice }, false, "removed from client-b")
        XCTAssertEqual(forB?.count, 1, "Bob, whom client-b never removed, is still offered to it (single sign-on)")
        let forA = try call("getAccounts", #"{"clientId":"client-a","redirectUri":"client-a"}"#)["accounts"] as? [[String: Any]]
        XCTAssertTrue(forA?.contains { $0["homeAccountId"] as? String == Self.alice } == true, "client-a keeps SSO")
    }

    /// The browser sign-in that msal-python's acquire_token_interactive starts, then silent calls from the cache for
    /// the D-Bus client and for a brokerd-native client (brokerctl): single sign-on across the two front ends.
    func testInteractiveSignInThenSilentForBothFrontEnds() throws {
        let entra = try TestEntra()
        let daemon = try entraDaemon(entra)
        try entra.control("/test/next-signin?username=alice@contoso.example")
        let answer = try call("acquireTokenInteractively", interactiveRequest(client: TestEntra.famA, username: "alice@contoso.example"))
        let token = try XCTUnwrap(answer["brokerTokenResponse"] as? [String: Any], "\(answer) \(daemon.log)")
        let accessToken = try XCTUnwrap(token["accessToken"] as? String)
        XCTAssertFalse(accessToken.isEmpty)
        XCTAssertGreaterThan(token["expiresOn"] as? Int ?? 0, Int(Date().timeIntervalSince1970) * 1_000, "epoch milliseconds")
        let payload = try XCTUnwrap((token["idToken"] as? String)?.split(separator: ".").dropFirst().first)
        let claims = String(decoding: Data(base64Encoded: base64(String(payload))) ?? Data(), as: UTF8.self)
        XCTAssertTrue(claims.contains(#""preferred_username": "alice@contoso.example""#)
                      || claims.contains(#""preferred_username":"alice@contoso.example""#), claims)
        let clientInfo = String(decoding: Data(base64Encoded: base64(token["clientInfo"] as? String ?? "")) ?? Data(), as: UTF8.self)
        XCTAssertTrue(clientInfo.contains("a1ce0000-0000-4000-8000-000000000001") && clientInfo.contains(TestEntra.contoso), clientInfo)

        let hid = "a1ce0000-0000-4000-8000-000000000001.\(TestEntra.contoso)"
        let silent = try call("acquireTokenSilently", silentRequest(account: hid, client: TestEntra.famA,
                                                                    authority: "https://login.microsoftonline.com/common",
                                                                    scope: TestEntra.graph))
        XCTAssertTrue((silent["brokerTokenResponse"] as? [String: Any])?["accessToken"] as? String == accessToken, "from the cache")
        let native = try daemon.ctl(["token", "--client-id", TestEntra.famA, "--authority", "https://login.microsoftonline.com/common",
                                     "--scope", TestEntra.graph])
        XCTAssertEqual(native.status, 0, native.stderr)
        XCTAssertTrue(native.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == accessToken,
                      "the socket API's client gets the token the D-Bus client signed in for")
        XCTAssertEqual(try entra.tokenRequests().count, 1, "one sign-in, no refresh")
    }

    /// A sign-in whose browser never comes back is ended by cancelInteractiveFlow (as pymsalruntime sends it), and the
    /// waiting call is answered UserCanceled.
    func testCancelEndsARunningSignIn() throws {
        let entra = try TestEntra()
        let daemon = try entraDaemon(entra, browser: "/bin/true")
        _ = try call("getLinuxBrokerVersion", "{}")  // serving on the bus
        let waiting = Process()
        waiting.executableURL = URL(fileURLWithPath: "/usr/bin/busctl")
        waiting.arguments = ["--address=\(busAddress)", "--json=short", "call", "com.microsoft.identity.broker1",
                             "/com/microsoft/identity/broker1", "com.microsoft.identity.Broker1", "acquireTokenInteractively",
                             "sss", "0.0", "fake-correlation-id", interactiveRequest(client: TestEntra.famA)]
        let output = Pipe()
        waiting.standardOutput = output
        try waiting.run()
        waitFor("the sign-in waiting for its browser") { daemon.log.contains("browser sign-in waiting for its redirect") }
        let cancel = #"{"error":{"context":"The InteractiveRequest was canceled on behalf of the user","diagnostics":null,"errorCode":0,"status":7,"subStatus":0,"tag":579379414}}"#
        XCTAssertNotNil(try call("cancelInteractiveFlow", cancel))
        let reply = output.fileHandleForReading.readDataToEndOfFile()  // ends when busctl exits
        waiting.waitUntilExit()
        let text = ((try? JSONSerialization.jsonObject(with: reply)) as? [String: Any]).flatMap { ($0["data"] as? [String])?.first } ?? ""
        let answer = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        XCTAssertEqual(error(answer)?["status"] as? Int, 7, "UserCanceled: \(answer) \(daemon.log)")
    }

    private func base64(_ base64url: String) -> String {
        var text = base64url.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return text
    }

    func testTheNameIsNeverTakenFromItsOwner() throws {
        let first = try daemon()
        XCTAssertNotNil(try call("getLinuxBrokerVersion", "{}")["linuxBrokerVersion"])
        let second = try daemon()
        for _ in 0..<200 where !second.log.contains("another process owns") { usleep(25_000) }
        XCTAssertTrue(second.log.contains("another process owns com.microsoft.identity.broker1"), second.log)
        let shown = try second.ctl(["status"])
        XCTAssertTrue(shown.stdout.contains("D-Bus") && shown.stdout.contains("not serving: another process owns"), shown.stdout)
        first.stop()
        // The owner left: the name is free (nobody queued for it), and the second broker serves its socket still.
        XCTAssertEqual(try second.ctl(["status"]).status, 0)
    }

    /// On by default (the other tests here start brokerd without a flag); `dbus_broker = false` turns it off.
    func testTurnedOffNothingIsServedOnTheBus() throws {
        let daemon = try daemon(dbus: false)
        for _ in 0..<1_000 where !daemon.log.contains("the D-Bus front end is off") { usleep(20_000) }
        XCTAssertTrue(daemon.log.contains("the D-Bus front end is off"), "said so, and decided: \(daemon.log)")
        var failure = ""
        XCTAssertNil(try call("getLinuxBrokerVersion", "{}", failure: &failure))
        XCTAssertTrue(failure.contains("com.microsoft.identity.broker1") || !failure.isEmpty, failure)
        XCTAssertFalse(try daemon.ctl(["status", "--json"]).stdout.contains("dbusBroker"), "absent while it is off")
    }
}
