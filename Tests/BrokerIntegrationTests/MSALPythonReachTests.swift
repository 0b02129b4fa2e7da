import Foundation
import XCTest

/// How the real client reaches brokerd (issue #12): D-Bus activation when the app starts first, a sign-in the user
/// cancels, and a caller of another uid. The client is unmodified msal-python 1.39 + pymsalruntime 0.20.7 (PyPI,
/// Tests/dbus/msal_app.py) on a private bus, against the Entra emulator; busctl plays the other clients.
final class MSALPythonReachTests: XCTestCase {
    private var python = ""
    static let nobody = 65_534

    override func setUpWithError() throws {
        python = try msalPython()
    }

    private var appScript: String { TestIdP.root + "/Tests/dbus/msal_app.py" }

    /// msal_app.py's report, one entry per step.
    private func report(_ result: CommandResult, file: StaticString = #filePath, line: UInt = #line) -> [[String: Any]] {
        XCTAssertEqual(result.status, 0, result.stderr, file: file, line: line)
        return (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [[String: Any]] ?? []
    }

    /// A $BROWSER that only notes that brokerd opened it: the sign-in it stands for is never completed.
    private func idleBrowser(in directory: TemporaryDirectory) throws -> (browser: String, opened: String) {
        let browser = directory.path + "/idle-browser.sh", opened = directory.path + "/browser-opened"
        try "#!/bin/sh\necho opened >> '\(opened)'\n".write(toFile: browser, atomically: true, encoding: .utf8)
        chmod(browser, 0o755)
        return (browser, opened)
    }

    private func waitForFile(_ path: String, file: StaticString = #filePath, line: UInt = #line) {
        for _ in 0..<3_000 where !FileManager.default.fileExists(atPath: path) { usleep(20_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), "\(path) never appeared", file: file, line: line)
    }

    // MARK: D-Bus activation

    /// The app starts first: its startup Ping makes the bus run the shipped activation file's brokerd (Exec= pointed
    /// at this build with the test's configuration). msal-python keeps the broker on (brokerd answered the Ping
    /// within the client's 5 s) and signs in through it: the emulator redeemed brokerd's code, and brokerd logged the
    /// calls, so msal's own fallback flow cannot pass this test.
    func testAnAppThatStartsFirstGetsBrokerdStartedByTheBus() throws {
        let entra = try TestEntra()
        let daemon = try Daemon(config: entra.brokerConfig)  // its paths and configuration; the bus starts it
        let (services, pidFile) = try activationFiles(daemon, entra)
        let bus = try PrivateSessionBus { PrivateSessionBus.sessionConfiguration(socketPath: $0, serviceDirectory: services) }
        try bus.startSecretService()
        defer { withExtendedLifetime(bus) { Self.stopActivated(pidFile: pidFile) } }
        XCTAssertNotEqual(try bus.busctl(["status", DBusName.name]).status, 0, "nobody owns the name before the app starts")
        XCTAssertFalse(FileManager.default.fileExists(atPath: pidFile))

        try entra.control("/test/next-signin?username=alice@contoso.example")
        let steps = report(try runCommand(python, [appScript, entra.http, TestEntra.famA, "broker",
                                                   "interactive|\(TestEntra.graph)|alice@contoso.example"],
                                          environment: bus.environment))
        XCTAssertEqual(steps.count, 2, "\(steps) \(daemon.log)")
        XCTAssertEqual(steps.first?["enabled"] as? Bool, true, "the startup Ping found brokerd: \(steps) \(bus.log)")
        XCTAssertEqual(steps.last?["token_source"] as? String, "broker", "\(steps) \(daemon.log)")
        XCTAssertEqual(steps.last?["preferred_username"] as? String, "alice@contoso.example")

        // Started by the bus: the activation is in the bus's log, and brokerd runs with the starter's variables.
        XCTAssertTrue(bus.log.contains("Successfully activated service 'com.microsoft.identity.broker1'"), bus.log)
        let pid = Int32((try? String(contentsOfFile: pidFile, encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        XCTAssertGreaterThan(pid, 0, "the launcher never ran")
        let starter = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))).map {
            String(decoding: $0, as: UTF8.self).split(separator: "\0").map(String.init)
        } ?? []
        XCTAssertTrue(starter.contains("DBUS_STARTER_BUS_TYPE=session"), "\(starter.filter { $0.hasPrefix("DBUS") })")
        XCTAssertEqual(try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"),
                       URL(fileURLWithPath: Binaries.brokerd).resolvingSymlinksInPath().path)

        let calls = daemon.log.split(separator: "\n").filter { $0.contains("D-Bus request") }
        XCTAssertTrue(calls.contains { $0.contains("method=acquireTokenInteractively") }, daemon.log)
        XCTAssertTrue(daemon.log.contains("serving on the D-Bus session bus"), "on by default, no flag: \(daemon.log)")
        let grants = try entra.tokenRequests().compactMap { $0["grant_type"] as? String }
        XCTAssertEqual(grants, ["authorization_code"], "brokerd redeemed the sign-in's code")
        let status = try daemon.ctl(["status", "--json"])
        XCTAssertTrue(status.stdout.contains(#""dbusBroker":"serving com.microsoft.identity.broker1 on the session bus""#),
                      status.stdout + status.stderr)
    }

    /// A bus service directory with the shipped activation file, its Exec= pointed at a launcher that runs this build's
    /// brokerd as `daemon` would run (and notes its pid in the returned file).
    private func activationFiles(_ daemon: Daemon, _ entra: TestEntra) throws -> (services: String, pidFile: String) {
        let services = daemon.directory.path + "/dbus-services"
        try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
        let pidFile = daemon.directory.path + "/activated.pid"
        let launcher = daemon.directory.path + "/activate-brokerd.sh"
        let environment = ["BROWSER=\(TestIdP.fakeBrowser)", "IDP_BROWSER_LOG=\(entra.directory.path)/browser.log",
                           "XDG_RUNTIME_DIR=\(daemon.directory.path)/run"]
        try """
            #!/bin/sh
            # Run by the bus's activation: brokerd of this test, with its output in the test's log.
            echo $$ > '\(pidFile)'
            exec /usr/bin/env -u NOTIFY_SOCKET -u LISTEN_FDS -u LISTEN_PID -u LISTEN_FDNAMES -u JOURNAL_STREAM \
                -u WATCHDOG_USEC \(environment.map { "'\($0)'" }.joined(separator: " ")) \
                '\(Binaries.brokerd)' \(daemon.arguments.map { "'\($0)'" }.joined(separator: " ")) >> '\(daemon.logPath)' 2>&1

            """.write(toFile: launcher, atomically: true, encoding: .utf8)
        chmod(launcher, 0o755)
        let shipped = try String(contentsOfFile: TestIdP.root + "/systemd/com.microsoft.identity.broker1.service", encoding: .utf8)
        XCTAssertTrue(shipped.contains("\nExec=/usr/bin/brokerd\n"), shipped)
        try shipped.replacingOccurrences(of: "\nExec=/usr/bin/brokerd\n", with: "\nExec=\(launcher)\n")
            .write(toFile: services + "/com.microsoft.identity.broker1.service", atomically: true, encoding: .utf8)

        return (services, pidFile)
    }

    /// The activated brokerd is no child of the test: stop it by the pid its launcher wrote, and wait until it is gone.
    private static func stopActivated(pidFile: String) {
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
              let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0 else { return }
        kill(pid, SIGTERM)
        for _ in 0..<1_000 where kill(pid, 0) == 0 { usleep(10_000) }
        if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
    }

    // MARK: InteractionRequired

    /// alice is signed in to brokerd, but the IdP has revoked her refresh tokens. A new app's interactive call
    /// (no prompt) first tries a silent sign-in: brokerd's refresh is refused (invalid_grant), brokerd answers
    /// InteractionRequired (status 2), and pymsalruntime falls back to acquireTokenInteractively, which signs her in.
    func testInteractionRequiredFromTheIdPFallsBackToInteractive() throws {
        let entra = try TestEntra()
        let bus = try PrivateSessionBus()
        try bus.startSecretService()
        let daemon = try Daemon(config: entra.brokerConfig)
        daemon.environment = ["BROWSER": TestIdP.fakeBrowser, "IDP_BROWSER_LOG": entra.directory.path + "/browser.log",
                              "DBUS_SESSION_BUS_ADDRESS": bus.address]
        try daemon.start()
        try bus.waitForBroker()
        let login = try entra.signIn(daemon, user: "alice@contoso.example", client: TestEntra.famA)
        XCTAssertEqual(login.status, 0, login.stderr)
        try entra.control("/test/revoke-refresh-tokens?username=alice@contoso.example")
        try entra.control("/test/next-signin?username=alice@contoso.example")

        let steps = report(try runCommand(python, [appScript, entra.http, TestEntra.famB, "interactive|https://graph.microsoft.com/Mail.Read"],
                                          environment: bus.environment))
        XCTAssertEqual(steps.first?["token_source"] as? String, "broker", "\(steps) \(daemon.log)")
        XCTAssertEqual(steps.first?["preferred_username"] as? String, "alice@contoso.example", "\(steps)")
        let requests = try entra.tokenRequests().map { "\($0["grant_type"] as? String ?? "?") \($0["error"] as? String ?? "ok")" }
        XCTAssertEqual(requests, ["authorization_code ok", "refresh_token invalid_grant", "authorization_code ok"],
                       "brokerctl's sign-in, the refused refresh, the fallback's sign-in")
        let calls = daemon.log.split(separator: "\n").filter { $0.contains("D-Bus request") }
            .compactMap { $0.split(separator: " ").first { $0.hasPrefix("method=") } }.map(String.init)
        XCTAssertEqual(calls, ["method=getAccounts", "method=acquireTokenSilently", "method=acquireTokenInteractively"],
                       daemon.log)
    }

    // MARK: Cancel

    /// msal-python's interactive sign-in waits on a browser that never comes back; another client sends
    /// cancelInteractiveFlow in the shape pymsalruntime's cancel_async_operation() does (msal-python itself has no
    /// cancel). brokerd answers the waiting call UserCanceled (status 7), msal-python surfaces that as the app's
    /// result, nothing was redeemed, and brokerd keeps serving.
    func testACancelledSignInReachesTheAppAsUserCanceled() throws {
        let entra = try TestEntra()
        let bus = try PrivateSessionBus()
        try bus.startSecretService()
        let (browser, opened) = try idleBrowser(in: entra.directory)
        let daemon = try Daemon(config: entra.brokerConfig)
        daemon.environment = ["BROWSER": browser, "DBUS_SESSION_BUS_ADDRESS": bus.address]
        try daemon.start()
        try bus.waitForBroker()

        let app = try RunningCommand(python, [appScript, entra.http, TestEntra.famA, "interactive|\(TestEntra.graph)"],
                                     environment: bus.environment)
        waitForFile(opened)  // brokerd is waiting for the browser's redirect

        // Another app's cancel (busctl's) ends none of this app's sign-ins.
        let foreign = try bus.broker1("cancelInteractiveFlow", Self.cancelRequest)
        XCTAssertEqual(foreign.answer?.count, 0, "{} as the client accepts it: \(foreign.result.stderr)")
        try waitFor("the foreign cancel answered") { daemon.log.contains("cancelInteractiveFlow ended 0 sign-in(s)") }
        // The same app's (another process of msal-python's interpreter: the same executable) ends it.
        let request = entra.directory.path + "/cancel.json"
        try Self.cancelRequest.write(toFile: request, atomically: true, encoding: .utf8)
        let own = try runCommand(python, [TestIdP.root + "/Tests/dbus/one_connection.py", "call:cancelInteractiveFlow:\(request)"],
                                 environment: bus.environment)
        XCTAssertEqual(own.status, 0, own.stderr)
        let steps = report(app.finish())
        XCTAssertEqual(steps.first?["error"] as? String, "broker_error", "\(steps) \(daemon.log)")
        XCTAssertTrue((steps.first?["error_description"] as? String)?.contains("Status_UserCanceled") == true, "\(steps)")
        // brokerd's reason, not its own time limit ("no sign-in within N s"): the cancel ended it.
        let cancels = daemon.log.split(separator: "\n").filter { $0.contains("cancelInteractiveFlow") || $0.contains("identified") }
        XCTAssertTrue((steps.first?["error_description"] as? String)?.contains("the sign-in was canceled") == true,
                      "\(steps) \(cancels.joined(separator: "\n"))")
        XCTAssertNil(steps.first?["access_token_sha256"])

        XCTAssertEqual(try entra.tokenRequests().count, 0, "no code was redeemed")
        XCTAssertTrue(daemon.log.contains("method=cancelInteractiveFlow"), daemon.log)
        let accounts = try bus.broker1("getAccounts", #"{"clientId":"\#(TestEntra.famA)"}"#).answer?["accounts"] as? [Any]
        XCTAssertEqual(accounts?.count, 0, "serving still")
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0)
    }

    /// pymsalruntime's cancel (its shape: an error object, a new correlation id).
    static let cancelRequest = #"{"error":{"context":"The InteractiveRequest was canceled on behalf of the user","diagnostics":null,"errorCode":0,"status":7,"subStatus":0,"tag":579379414}}"#

    /// An app that leaves the bus (killed while it waits) leaves no sign-in behind: its unique name's
    /// NameOwnerChanged ends the device-code sign-in it started, which leaves the status.
    func testASignInEndsWhenItsCallerLeavesTheBus() throws {
        let entra = try TestEntra()
        let bus = try PrivateSessionBus()
        try bus.startSecretService()
        let daemon = try Daemon(config: entra.brokerConfig + "\ndbus_sign_in = \"device-code\"")
        daemon.environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address]
        try daemon.start()
        try bus.waitForBroker()

        let app = try RunningCommand(python, [appScript, entra.http, TestEntra.famA, "interactive|\(TestEntra.graph)"],
                                     environment: bus.environment)
        func pendingSignIns() throws -> Int {
            let status = try daemon.ctl(["status", "--json"])
            let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
            return (object?["pendingSignIns"] as? [Any])?.count ?? 0
        }
        try waitFor("the device-code sign-in to wait for the user") { try pendingSignIns() == 1 }
        kill(app.process.processIdentifier, SIGKILL)
        _ = app.finish()
        try waitFor("the sign-in to end with its caller") { try pendingSignIns() == 0 }
        XCTAssertTrue(daemon.log.contains("D-Bus caller left the bus; its sign-ins end"), daemon.log)
        XCTAssertEqual(try entra.tokenRequests().count, 0, "nothing was redeemed")
    }

    /// What the real client's own cancel does: pymsalruntime's cancel_async_operation() sends cancelInteractiveFlow
    /// only once its acquireTokenInteractively call has returned (libmsalruntime makes one blocking D-Bus call at a
    /// time), so it cannot end brokerd's sign-in early: brokerd's time limit ends it (interactive_timeout, here the
    /// minimum, 3 s). Should pymsalruntime ever send the cancel while the call runs, this test says so.
    func testPymsalruntimeSendsItsCancelOnlyAfterTheSignInReturns() throws {
        let entra = try TestEntra()
        let bus = try PrivateSessionBus()
        let (browser, opened) = try idleBrowser(in: entra.directory)
        let daemon = try Daemon(config: entra.brokerConfig.replacingOccurrences(of: "interactive_timeout = 60",
                                                                                with: "interactive_timeout = 3"))
        daemon.environment = ["BROWSER": browser, "DBUS_SESSION_BUS_ADDRESS": bus.address]
        try daemon.start()
        try bus.waitForBroker()

        let result = try runCommand(python, [TestIdP.root + "/Tests/dbus/pymsalruntime_cancel.py", TestEntra.famA,
                                             TestEntra.graph, opened], environment: bus.environment)
        XCTAssertEqual(result.status, 0, result.stderr)
        let report = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any] ?? [:]
        XCTAssertEqual(report["opened"] as? Bool, true, "\(report) \(daemon.log)")
        XCTAssertEqual(report["answered"] as? Bool, true, "\(report)")
        XCTAssertEqual(report["status"] as? String, "Response_Status.Status_UserCanceled", "\(report)")
        XCTAssertTrue((report["context"] as? String)?.contains("no sign-in within 3 s") == true,
                      "brokerd's time limit ended the sign-in, not the cancel: \(report)")
        // Each call is logged when it is answered; a cancel is answered at once.
        let calls = daemon.log.split(separator: "\n").filter { $0.contains("D-Bus request") }
            .compactMap { $0.split(separator: " ").first { $0.hasPrefix("method=") } }.map(String.init)
        XCTAssertEqual(Array(calls.suffix(2)), ["method=acquireTokenInteractively", "method=cancelInteractiveFlow"], daemon.log)
        XCTAssertEqual(try entra.tokenRequests().count, 0)
    }

    // MARK: Another uid

    /// A bus that lets every uid connect (unlike a real session bus), and the real client running as nobody: brokerd
    /// answers its calls with AccessDenied and logs the refusal; msal-python reports a broker error (not a token, not
    /// InteractionRequired: it does not fall back to interactive); brokerd serves its own uid as before.
    func testACallerOfAnotherUidIsRefusedAndTheOwnerIsServed() throws {
        guard geteuid() == 0 else { throw missing("needs root, to run the client as nobody (setpriv)") }
        let entra = try TestEntra()
        let bus = try PrivateSessionBus { PrivateSessionBus.sessionConfiguration(socketPath: $0, anyUser: true) }
        chmod(bus.directory.path, 0o755)  // nobody reaches the bus's socket through its directory
        let daemon = try Daemon(config: entra.brokerConfig)
        daemon.environment = ["BROWSER": TestIdP.fakeBrowser, "DBUS_SESSION_BUS_ADDRESS": bus.address]
        try daemon.start()
        try bus.waitForBroker()
        let asNobody = ["/usr/bin/setpriv", "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups"]

        let refused = try bus.broker1("getAccounts", #"{"clientId":"\#(TestEntra.famA)"}"#, prefix: asNobody)
        XCTAssertNil(refused.answer)
        XCTAssertNotEqual(refused.result.status, 0)
        // busctl prints any AccessDenied as "Access denied"; libdbus (python-dbus) shows the error's name and text.
        XCTAssertTrue(refused.result.stderr.contains("Access denied"), refused.result.stderr)
        let script = """
            import dbus, sys
            broker = dbus.bus.BusConnection(sys.argv[1]).get_object("\(DBusName.name)", "\(DBusName.path)", introspect=False)
            try:
                broker.getLinuxBrokerVersion("0.0", "c", "{}", dbus_interface="\(DBusName.interface)")
            except dbus.DBusException as error:
                print(error.get_dbus_name(), error.get_dbus_message())
            """
        let named = try runCommand(asNobody[0], Array(asNobody.dropFirst()) + ["/usr/bin/python3", "-c", script, bus.address])
        XCTAssertEqual(named.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
                       "org.freedesktop.DBus.Error.AccessDenied brokerd serves uid 0 only", named.stderr)

        let home = TemporaryDirectory("brokerd-nobody")
        chmod(home.path, 0o777)
        var environment = bus.environment
        environment["HOME"] = home.path
        environment["XDG_RUNTIME_DIR"] = home.path
        let steps = report(try runCommand(asNobody[0], Array(asNobody.dropFirst()) + [python, appScript, entra.http, TestEntra.famA,
                                          "broker", "interactive|\(TestEntra.graph)|alice@contoso.example"],
                                          environment: environment))
        XCTAssertEqual(steps.count, 2, "\(steps)")
        XCTAssertEqual(steps.first?["enabled"] as? Bool, true, "the bus answers a Ping for anyone: \(steps)")
        XCTAssertEqual(steps.last?["error"] as? String, "broker_error", "\(steps)")
        // pymsalruntime hides the error's text as "(pii)"; its name comes through.
        XCTAssertTrue((steps.last?["error_description"] as? String)?.contains("org.freedesktop.DBus.Error.AccessDenied") == true,
                      "\(steps)")
        XCTAssertNil(steps.last?["access_token_sha256"], "\(steps)")
        XCTAssertNil(steps.last?["token_source"], "\(steps)")

        let refusals = daemon.log.split(separator: "\n").filter { $0.contains("D-Bus call refused: the caller runs as another user") }
        for method in ["getAccounts", "getLinuxBrokerVersion", "acquireTokenSilently"] {  // busctl, python-dbus, msal
            XCTAssertTrue(refusals.contains { $0.contains("client_uid=\(Self.nobody)") && $0.contains("method=\(method)") },
                          "\(method): \(daemon.log)")
        }
        XCTAssertFalse(daemon.log.contains("method=acquireTokenInteractively"), "a refused call never reaches the broker")
        XCTAssertEqual(try entra.tokenRequests().count, 0)

        try entra.control("/test/next-signin?username=alice@contoso.example")
        let owner = try bus.broker1("acquireTokenInteractively", Self.interactiveRequest(client: TestEntra.famA))
        let token = owner.answer?["brokerTokenResponse"] as? [String: Any]
        XCTAssertFalse((token?["accessToken"] as? String ?? "").isEmpty, "\(owner.answer ?? [:]) \(owner.result.stderr)")
    }

    static func interactiveRequest(client: String) -> String {
        """
        {"authParameters":{"accessTokenToRenew":"","account":null,"authority":"https://login.microsoftonline.com/common",\
        "authorizationType":6,"clientId":"\(client)","decodedClaims":"","isSignIn":true,"parentWindow":{"handle":1},\
        "popParams":null,"redirectUri":"https://login.microsoftonline.com/common/oauth2/nativeclient",\
        "requestedScopes":["\(TestEntra.graph)"],"username":"alice@contoso.example","uxContextHandle":-1},"parentWindowHandle":1}
        """
    }
}
