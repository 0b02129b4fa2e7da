import Foundation
import XCTest

/// The request shapes other clients of com.microsoft.identity.broker1 were recorded sending (Edge/OneAuth, sso-mib,
/// linux-entra-sso, onedrive: shared/reference/broker-apis.md §1.3), replayed with busctl against brokerd and the
/// Entra emulator, with the emulator's apps and user in place of the recorded ones and every other key as recorded.
/// Then bad input on the bus: each gets a well-formed error, and the daemon keeps serving and loses nothing.
final class DBusClientReplayTests: XCTestCase {
    private var bus: PrivateSessionBus!
    private var entra: TestEntra!
    private var daemon: Daemon!
    static let nativeClient = "https://login.microsoftonline.com/common/oauth2/nativeclient"
    static let alice = "a1ce0000-0000-4000-8000-000000000001"
    static var aliceHome: String { "\(alice).\(TestEntra.contoso)" }
    static let graphDefault = "https://graph.microsoft.com/.default"

    override func setUpWithError() throws {
        bus = try PrivateSessionBus()
        entra = try TestEntra()
    }

    override func tearDown() {
        daemon = nil
        bus = nil
        entra = nil
    }

    /// brokerd on the private bus (on by default: no flag) with alice signed in for family app A through brokerctl.
    private func startWithAlice(browser: String = TestIdP.fakeBrowser) throws {
        daemon = try Daemon(config: entra.brokerConfig)
        daemon.environment = ["BROWSER": browser, "IDP_BROWSER_LOG": entra.directory.path + "/browser.log",
                              "DBUS_SESSION_BUS_ADDRESS": bus.address]
        try daemon.start()
        try bus.waitForBroker()
        guard browser == TestIdP.fakeBrowser else { return }
        let login = try entra.signIn(daemon, user: "alice@contoso.example", client: TestEntra.famA)
        XCTAssertEqual(login.status, 0, login.stderr)
    }

    private func call(_ method: String, _ request: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let (answer, result) = try bus.broker1(method, request)
        XCTAssertNotNil(answer, "\(method): \(result.stderr)", file: file, line: line)
        return answer ?? [:]
    }

    private func error(_ answer: [String: Any]) -> [String: Any]? {
        (answer["brokerTokenResponse"] as? [String: Any])?["error"] as? [String: Any]
    }

    /// A token answer as libmsalruntime and sso-mib require it (shared/reference/linux-broker-dbus.md §4.1).
    private func checkToken(_ answer: [String: Any], file: StaticString = #filePath, line: UInt = #line) {
        let token = answer["brokerTokenResponse"] as? [String: Any] ?? [:]
        XCTAssertFalse((token["accessToken"] as? String ?? "").isEmpty, "\(answer)", file: file, line: line)
        XCTAssertEqual(token["accessTokenType"] as? Int, 0, file: file, line: line)
        XCTAssertEqual((token["idToken"] as? String)?.split(separator: ".", omittingEmptySubsequences: false).count, 3,
                       file: file, line: line)
        XCTAssertGreaterThan(token["expiresOn"] as? Int ?? 0, Int(Date().timeIntervalSince1970) * 1_000, "epoch ms",
                             file: file, line: line)
        XCTAssertNotNil(token["extendedExpiresOn"] as? Int, file: file, line: line)
        var info = (token["clientInfo"] as? String ?? "").replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        while info.count % 4 != 0 { info += "=" }
        let decoded = String(decoding: Data(base64Encoded: info) ?? Data(), as: UTF8.self)
        XCTAssertTrue(decoded.contains(Self.alice) && decoded.contains(TestEntra.contoso), decoded, file: file, line: line)
    }

    private func json(_ object: Any) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data(), as: UTF8.self)
    }

    // MARK: Replays

    /// Edge/OneAuth's acquireTokenSilently as captured with dbus-monitor (himmelblau#657): the account inside
    /// authParameters with the cache alias login.windows.net, requestOptions [205], mkt, a `.default` scope. Family
    /// app B gets its token by brokerd's family refresh token.
    func testEdgeSilentRequest() throws {
        try startWithAlice()
        let edge = """
            {"authParameters":{"accessTokenToRenew":"","account":{"alternativeAccountId":"","clientInfo":"",\
            "environment":"login.windows.net","familyName":"","givenName":"alice","homeAccountId":"\(Self.aliceHome)",\
            "homeEnvironment":"","localAccountId":"\(Self.alice)","middleName":"","name":"alice","passwordChangeUrl":"",\
            "passwordExpiry":0,"realm":"\(TestEntra.contoso)","username":"alice@contoso.example"},\
            "additionalQueryParametersForAuthorization":{"mkt":"en-GB","x-client-xtra-sku":"MSAL.xplat.Linux|1.1.0+012a7425,|,|,|,|"},\
            "authority":"https://login.microsoftonline.com/common","authorizationType":1,"clientId":"\(TestEntra.famB)",\
            "decodedClaims":"","enrollmentId":"","password":"","popParams":null,"redirectUri":"\(Self.nativeClient)",\
            "requestOptions":[205],"requestedScopes":["\(Self.graphDefault)"],"username":"alice@contoso.example","uxContextHandle":-1}}
            """
        checkToken(try call("acquireTokenSilently", edge))
        let last = try entra.tokenRequests().last
        XCTAssertEqual(last?["grant_type"] as? String, "refresh_token", "\(String(describing: last))")
        XCTAssertEqual(last?["client_id"] as? String, TestEntra.famB)
    }

    /// sso-mib (mib-client-app.c): the version with msalCppVersion, accounts with the keys mib-account.c requires, an
    /// interactive sign-in with prompt select_account (no account, no username), a PoP request brokerd refuses
    /// clearly, and removeAccount {clientId, account} for one app only.
    func testSsoMibRequests() throws {
        try startWithAlice()
        let version = try runCommand(Binaries.brokerd, ["--version"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try call("getLinuxBrokerVersion", #"{"msalCppVersion":"1.28.0"}"#)["linuxBrokerVersion"] as? String, version)

        let accounts = try call("getAccounts", #"{"clientId":"\#(TestEntra.famA)","redirectUri":"\#(Self.nativeClient)"}"#)
        let account = try XCTUnwrap((accounts["accounts"] as? [[String: Any]])?.first { $0["homeAccountId"] as? String == Self.aliceHome },
                                    "\(accounts)")
        for key in ["homeAccountId", "environment", "realm", "localAccountId", "username"] {
            XCTAssertFalse((account[key] as? String ?? "").isEmpty, "sso-mib drops an account without \(key): \(account)")
        }

        try entra.control("/test/next-signin?username=alice@contoso.example")
        let interactive = """
            {"authParameters":{"additionalQueryParametersForAuthorization":{},"authority":"https://login.microsoftonline.com/common",\
            "authorizationType":6,"clientId":"\(TestEntra.famA)","decodedClaims":"","popParams":null,"prompt":"select_account",\
            "redirectUri":"\(Self.nativeClient)","requestedScopes":["https://graph.microsoft.com/Mail.Read"],"uxContextHandle":-1}}
            """
        checkToken(try call("acquireTokenInteractively", interactive))
        XCTAssertEqual(try entra.tokenRequests().last?["grant_type"] as? String, "authorization_code")

        let pop = """
            {"clientId":"\(TestEntra.famA)","popParams":{"authenticationScheme":"pop","uriHost":"https://graph.microsoft.com/v1.0/me",\
            "httpMethod":"GET","nonce":"n-0","homeAccountId":"\(Self.aliceHome)"}}
            """
        let refused = try XCTUnwrap(error(try call("generateSignedHttpRequest", pop)), "an error, not a signed request")
        XCTAssertEqual(refused["status"] as? Int, 6, "ApiContractViolation: \(refused)")
        XCTAssertTrue((refused["context"] as? String)?.contains("proof-of-possession") == true, "\(refused)")
        for key in ["tag", "errorCode"] { XCTAssertNotNil(refused[key], "libmsalruntime requires \(key)") }

        XCTAssertEqual(try call("removeAccount", json(["clientId": TestEntra.famB, "account": account])).count, 0)
        let forB = try call("getAccounts", #"{"clientId":"\#(TestEntra.famB)","redirectUri":"\#(Self.nativeClient)"}"#)
        XCTAssertEqual((forB["accounts"] as? [Any])?.count, 0, "removed for app B: \(forB)")
        let forA = try call("getAccounts", #"{"clientId":"\#(TestEntra.famA)","redirectUri":"\#(Self.nativeClient)"}"#)
        XCTAssertEqual((forA["accounts"] as? [Any])?.count, 1, "app A keeps single sign-on: \(forA)")
    }

    /// linux-entra-sso's native host: accounts with its session UUID as redirectUri, a silent Graph token for the
    /// account getAccounts gave it, and the PRT SSO cookie, which brokerd cannot make (no device registration).
    /// onedrive's version request ({clientId}) is answered too.
    func testLinuxEntraSsoRequests() throws {
        try startWithAlice()
        XCTAssertNotNil(try call("getLinuxBrokerVersion", #"{"clientId":"\#(TestEntra.famA)"}"#)["linuxBrokerVersion"])
        let listed = try call("getAccounts", #"{"clientId":"\#(TestEntra.famA)","redirectUri":"5b1a4ae4-8a5e-4c3f-9d1e-3f0c2a9d7b11"}"#)
        let account = try XCTUnwrap((listed["accounts"] as? [[String: Any]])?.first, "\(listed)")
        let authParameters: [String: Any] = [
            "account": account, "additionalQueryParametersForAuthorization": [String: Any](),
            "authority": "https://login.microsoftonline.com/common", "authorizationType": 1, "clientId": TestEntra.famA,
            "redirectUri": Self.nativeClient, "requestedScopes": [Self.graphDefault],
            "username": account["username"] ?? "", "uxContextHandle": -1,
        ]
        checkToken(try call("acquireTokenSilently", json(["authParameters": authParameters])))

        var cookieParameters = authParameters
        cookieParameters["authorizationType"] = 8
        cookieParameters["ssoUrl"] = "https://login.microsoftonline.com/"
        let cookie = try call("acquirePrtSsoCookie", json([
            "account": account, "authParameters": cookieParameters, "mamEnrollment": false,
            "ssoUrl": "https://login.microsoftonline.com/",
        ]))
        let refused = try XCTUnwrap(error(cookie), "\(cookie)")
        XCTAssertEqual(refused["status"] as? Int, 17, "DeviceNotRegistered: \(refused)")
        XCTAssertTrue((refused["context"] as? String)?.contains("Primary Refresh Token") == true, "\(refused)")
        XCTAssertNil(cookie["cookieItems"])
        XCTAssertNil(cookie["cookieContent"])
    }

    /// The flags win over the configuration, both ways.
    func testTheFlagsOverTheConfiguration() throws {
        for (config, flag, serves) in [("", "--no-dbus-broker", false), ("dbus_broker = false\n", "--dbus-broker", true)] {
            let daemon = try Daemon(config: entra.brokerConfig + "\n" + config)
            daemon.environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address]
            daemon.extraArguments = [flag]
            try daemon.start()
            if serves { try bus.waitForBroker() } else {
                for _ in 0..<1_000 where !daemon.log.contains("the D-Bus front end is off") { usleep(20_000) }
                XCTAssertTrue(daemon.log.contains("the D-Bus front end is off"), daemon.log)
            }
            let status = try daemon.ctl(["status", "--json"]).stdout
            XCTAssertEqual(status.contains(#""dbusBroker":"serving"#), serves, "\(flag): \(status)")
            XCTAssertEqual(try bus.busctl(["status", DBusName.name]).status == 0, serves, flag)
            daemon.stop()
        }
    }

    // MARK: Bad input

    /// Malformed JSON, wrong types, an unknown method, a wrong signature and huge strings: each a well-formed error
    /// reply (brokerd's JSON error for a request it read, sd-bus's D-Bus error for a call it never dispatched). The
    /// daemon keeps serving, alice's account and token are still there, and nothing reached the IdP.
    func testBadInputGetsClearErrorsAndLosesNothing() throws {
        try startWithAlice()
        let requestsBefore = try entra.tokenRequests().count
        let cases: [(method: String, request: String, says: String)] = [
            ("getAccounts", #"{"clientId":"#, "not valid JSON"),
            ("acquireTokenSilently", "[1,2]", "must be a JSON object"),
            ("getAccounts", #"{"clientId":5}"#, "clientId must be a non-empty string"),
            ("getAccounts", #"{"redirectUri":"x"}"#, "clientId is missing"),
            ("acquireTokenSilently", #"{"authParameters":"x"}"#, "authParameters must be a JSON object"),
            ("acquireTokenSilently", #"{"authParameters":{"clientId":"\#(TestEntra.famA)","requestedScopes":"User.Read"}}"#,
             "requestedScopes must be an array of strings"),
            ("acquireTokenInteractively", #"{"authParameters":{"clientId":"\#(TestEntra.famA)","account":"alice"}}"#,
             "authParameters.account must be a JSON object"),
            ("acquireTokenSilently", #"{"authParameters":{"clientId":"\#(TestEntra.famA)","account":{"homeAccountId":7}}}"#,
             "homeAccountId must be a JSON string"),
            ("removeAccount", #"{"clientId":"\#(TestEntra.famA)","account":[]}"#, "account must be a JSON object"),
        ]
        for (method, request, says) in cases {
            let answer = try call(method, request)
            let refused = error(answer)
            XCTAssertEqual(refused?["status"] as? Int, 6, "\(method) \(request): \(answer)")
            XCTAssertTrue((refused?["context"] as? String)?.contains(says) == true, "\(method) \(request): \(answer)")
        }
        XCTAssertTrue(daemon.log.contains("D-Bus request refused"), daemon.log)

        let unknown = try bus.broker1("acquireEverything", "{}")
        XCTAssertNotEqual(unknown.result.status, 0)
        XCTAssertTrue(unknown.result.stderr.contains("acquireEverything"), unknown.result.stderr)
        let signature = try bus.broker1("getAccounts", #"{"clientId":"x"}"#, signature: "s")
        XCTAssertNotEqual(signature.result.status, 0)
        XCTAssertTrue(signature.result.stderr.contains("sss"), "names the signature it expects: \(signature.result.stderr)")

        // 100 kB is within a D-Bus argument and under the limit: served. 2 MiB is over the socket API's 1 MiB limit.
        let longClient = String(repeating: "c", count: 100_000)
        XCTAssertNotNil(try call("getAccounts", #"{"clientId":"\#(longClient)"}"#)["accounts"] as? [Any])
        let longCorrelation = try bus.broker1("getAccounts", #"{"clientId":"x"}"#, correlationId: String(repeating: "9", count: 5_000))
        XCTAssertTrue((error(longCorrelation.answer ?? [:])?["context"] as? String)?.contains("correlation id") == true,
                      "\(longCorrelation.answer ?? [:])")
        let huge = try hugeRequest(bytes: 2 << 20)
        XCTAssertEqual(huge.status, 0, huge.stderr)
        XCTAssertTrue(huge.stdout.contains(#""status":6"#) && huge.stdout.contains("larger than 1048576 bytes"), huge.stdout)

        let accounts = try call("getAccounts", #"{"clientId":"\#(TestEntra.famA)"}"#)
        XCTAssertEqual((accounts["accounts"] as? [[String: Any]])?.first?["homeAccountId"] as? String, Self.aliceHome)
        let silent = try call("acquireTokenSilently", json(["authParameters": [
            "clientId": TestEntra.famA, "authority": "https://login.microsoftonline.com/common",
            "requestedScopes": [TestEntra.graph], "account": ["homeAccountId": Self.aliceHome],
        ]]))
        checkToken(silent)
        XCTAssertEqual(try entra.tokenRequests().count, requestsBefore, "bad input reached no IdP; the token came from the cache")
    }

    /// python-dbus (libdbus) sends a request larger than busctl's command line can carry.
    private func hugeRequest(bytes: Int) throws -> CommandResult {
        let script = """
            import dbus, sys
            bus = dbus.bus.BusConnection(sys.argv[1])
            broker = bus.get_object("\(DBusName.name)", "\(DBusName.path)", introspect=False)
            request = '{"clientId":"' + "x" * int(sys.argv[2]) + '"}'
            print(broker.getAccounts("0.0", "huge", request, dbus_interface="\(DBusName.interface)"))
            """
        return try runCommand("/usr/bin/python3", ["-c", script, bus.address, String(bytes)])
    }

    /// A caller that leaves while its sign-in is waiting for the browser: brokerd keeps serving other calls, and the
    /// orphaned sign-in, once cancelled, answers into the void without harm.
    func testACallerThatDisconnectsMidCall() throws {
        let browser = entra.directory.path + "/idle-browser.sh", opened = entra.directory.path + "/browser-opened"
        try "#!/bin/sh\necho opened >> '\(opened)'\n".write(toFile: browser, atomically: true, encoding: .utf8)
        chmod(browser, 0o755)
        try startWithAlice(browser: browser)
        let caller = Process()
        caller.executableURL = URL(fileURLWithPath: "/usr/bin/busctl")
        caller.arguments = ["--address=\(bus.address)", "call", DBusName.name, DBusName.path, DBusName.interface,
                            "acquireTokenInteractively", "sss", "0.0", "leaving", MSALPythonReachTests.interactiveRequest(client: TestEntra.famA)]
        caller.standardOutput = FileHandle.nullDevice
        caller.standardError = FileHandle.nullDevice
        try caller.run()
        for _ in 0..<3_000 where !FileManager.default.fileExists(atPath: opened) { usleep(20_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: opened), "the sign-in never started: \(daemon.log)")
        kill(caller.processIdentifier, SIGKILL)
        caller.waitUntilExit()

        XCTAssertNotNil(try call("getLinuxBrokerVersion", "{}")["linuxBrokerVersion"], "serving while the sign-in waits")
        XCTAssertEqual(try call("cancelInteractiveFlow", "{}").count, 0)
        // The orphaned call is answered (and logged) once its sign-in ends; the answer goes to nobody.
        for _ in 0..<1_000 where !daemon.log.contains("method=acquireTokenInteractively") { usleep(20_000) }
        XCTAssertTrue(daemon.log.contains("method=acquireTokenInteractively"), daemon.log)
        XCTAssertNotNil(try call("getLinuxBrokerVersion", "{}")["linuxBrokerVersion"], "serving after answering nobody")
        XCTAssertFalse(daemon.log.contains("D-Bus connection failed"), daemon.log)
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0)
        XCTAssertTrue(daemon.process?.isRunning == true)
    }
}
