import Foundation
import XCTest

/// The sign-in UI for D-Bus callers without a display (issue #12): the real msal-python with
/// `enable_broker_on_linux=True` (Tests/dbus/msal_app.py) on a private session bus; brokerd without DISPLAY,
/// WAYLAND_DISPLAY and BROWSER signs in with a device code, which it publishes in `brokerctl status`, to
/// `brokerctl watch` and as a desktop notification (Tests/dbus/notification_server.py plays the desktop's server).
/// The test, as the user, reads the code and approves it at the Entra emulator; msal-python gets its token.
final class HeadlessSignInTests: XCTestCase {
    private var bus: PrivateSessionBus!
    private var python = ""
    private var children: [ChildProcess] = []
    /// The Entra emulator's device codes begin so: none may reach a log, the status or an event.
    private let deviceCodePrefix = "DAQABAAEAAA"
    private let alice = "alice@contoso.example"

    override func setUpWithError() throws {
        python = try msalPython()
        bus = try PrivateSessionBus()
        try bus.startSecretService()
    }

    override func tearDown() {
        for child in children.reversed() where child.isRunning {
            kill(child.processIdentifier, SIGTERM)
            child.waitUntilExit()
        }
        children = []
        bus = nil
    }

    /// brokerd serving D-Bus, with `open_browser = "auto"` and the environment given (empty values count as unset).
    private func broker(_ entra: TestEntra, environment: [String: String] = [:], extraConfig: String = "",
                        interactiveTimeout: Int = 60) throws -> Daemon {
        let config = entra.brokerConfig.replacingOccurrences(of: #"open_browser = "always""#, with: #"open_browser = "auto""#)
            .replacingOccurrences(of: "interactive_timeout = 60", with: "interactive_timeout = \(interactiveTimeout)")
        let daemon = try Daemon(config: config + "\n" + extraConfig)
        daemon.environment = ["DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": "", "DBUS_SESSION_BUS_ADDRESS": bus.address]
            .merging(environment) { $1 }
        daemon.extraArguments = ["--dbus-broker"]
        try daemon.start()
        try entra.control("/test/config?device_flow_interval=1")
        return daemon
    }

    private func start(_ executable: String, _ arguments: [String], log: String) throws -> ChildProcess {
        let child = try ChildProcess(executable, arguments, environment: bus.environment, logPath: log)
        children.append(child)
        return child
    }

    /// The desktop's notification server on the private bus; returns its log of calls.
    private func startNotificationServer() throws -> String {
        let log = bus.directory.path + "/notifications.log"
        _ = try start("/usr/bin/python3", [TestIdP.root + "/Tests/dbus/notification_server.py", log], log: log + ".stderr")
        for _ in 0..<500 {
            if try bus.busctl(["list", "--acquired"]).stdout.contains("org.freedesktop.Notifications") { return log }
            usleep(20_000)
        }
        XCTFail("the notification server did not appear: \((try? String(contentsOfFile: log + ".stderr", encoding: .utf8)) ?? "")")
        return log
    }

    /// The msal-python app, running its steps in the background; its report is the last line of `log`.
    private func startApp(_ entra: TestEntra, _ steps: [String], log: String) throws -> ChildProcess {
        try start(python, [TestIdP.root + "/Tests/dbus/msal_app.py", entra.http, TestEntra.famA] + steps, log: log)
    }

    private func report(_ log: String) -> [[String: Any]] {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("[") }) else { return [] }
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [[String: Any]] ?? []
    }

    private func status(_ daemon: Daemon) throws -> [String: Any] {
        let shown = try daemon.ctl(["status", "--json"])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        return (try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8))) as? [String: Any] ?? [:]
    }

    /// Polls `brokerctl status` until a sign-in waits (the app's call blocks meanwhile).
    private func waitForPendingSignIn(_ daemon: Daemon, app: ChildProcess, appLog: String) throws -> [String: Any] {
        for _ in 0..<600 {
            if let pending = (try status(daemon)["pendingSignIns"] as? [[String: Any]])?.first { return pending }
            guard app.isRunning else { break }
            usleep(50_000)
        }
        XCTFail("no pending sign-in: \(lines(appLog)) \(daemon.log)")
        throw NoPendingSignIn()
    }

    private func lines(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }


    private func notifications(_ log: String) -> [[String: Any]] {
        lines(log).compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    func testWithoutADisplayMSALSignsInWithADeviceCodeShownInStatusWatchAndANotification() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra)
        let notificationLog = try startNotificationServer()
        let watchLog = bus.directory.path + "/watch.log"
        _ = try start(Binaries.brokerctl, ["watch", "--socket", daemon.socket], log: watchLog)
        waitFor("brokerctl watch has subscribed") { lines(watchLog).contains { $0.hasPrefix("brokerctl: watching") } }

        let appLog = bus.directory.path + "/app.log"
        let app = try startApp(entra, ["interactive|\(TestEntra.graph)|\(alice)", "silent|\(TestEntra.graph)"], log: appLog)
        let pending = try waitForPendingSignIn(daemon, app: app, appLog: appLog)
        let code = try XCTUnwrap(pending["userCode"] as? String)
        let uri = try XCTUnwrap(pending["verificationUri"] as? String)
        XCTAssertEqual(pending["clientId"] as? String, TestEntra.famA)
        XCTAssertTrue(uri.hasSuffix("/devicelogin"), uri)
        XCTAssertGreaterThan(pending["expiresOn"] as? Int ?? 0, Int(Date().timeIntervalSince1970))
        XCTAssertTrue(app.isRunning, "msal-python waits for the sign-in")

        let human = try daemon.ctl(["status"])
        XCTAssertTrue(human.stdout.contains("sign-in waiting  go to \(uri) and enter \(code) (for app \(TestEntra.famA), expires in"),
                      human.stdout)
        waitFor("watch shows the code") { lines(watchLog).contains { $0.contains("sign-in waiting: go to \(uri) and enter \(code)") } }
        waitFor("the notification is shown") { notifications(notificationLog).contains { $0["method"] as? String == "Notify" } }
        let shown = try XCTUnwrap(notifications(notificationLog).first)
        XCTAssertEqual(shown["app"] as? String, "brokerd")
        XCTAssertTrue((shown["body"] as? String ?? "").contains(uri) && (shown["body"] as? String ?? "").contains(code), "\(shown)")
        XCTAssertTrue((shown["summary"] as? String ?? "").contains(code), "\(shown)")

        // The user enters the code at the identity provider.
        try entra.control("/test/approve-device?user_code=\(code)&username=\(alice)")
        app.waitUntilExit()
        let steps = report(appLog)
        XCTAssertEqual(steps.count, 2, "\(lines(appLog)) \(daemon.log)")
        XCTAssertEqual(steps.first?["token_source"] as? String, "broker", "\(steps)")
        XCTAssertEqual(steps.first?["preferred_username"] as? String, alice)
        XCTAssertEqual(steps.last?["token_source"] as? String, "cache", "\(steps)")
        XCTAssertTrue(try entra.tokenRequests().contains { $0["grant_type"] as? String == "urn:ietf:params:oauth:grant-type:device_code" })

        // The sign-in is over everywhere: the status, the watcher, the desktop.
        XCTAssertEqual((try status(daemon)["pendingSignIns"] as? [Any])?.count, 0)
        waitFor("watch shows the end") { lines(watchLog).contains { $0.hasSuffix("sign-in completed for app \(TestEntra.famA)") } }
        waitFor("the notification is closed") {
            notifications(notificationLog).contains { $0["method"] as? String == "CloseNotification" && $0["id"] as? Int == shown["id"] as? Int }
        }
        XCTAssertTrue(daemon.log.contains("flow=deviceCode") && daemon.log.contains("no display"), daemon.log)
        // The user code is for the user's eyes only (status, watch, notification), never the log; the device code for nobody.
        XCTAssertFalse(daemon.log.contains(code), "the log shows the user code")
        for text in [daemon.log, human.stdout, lines(watchLog).joined(), lines(notificationLog).joined(), lines(appLog).joined()] {
            XCTAssertFalse(text.contains(deviceCodePrefix), "a device code leaked: \(text)")
        }
    }

    /// Without a notification server the sign-in works all the same (status and events only); `dbus_sign_in =
    /// "device-code"` chooses the device code even with a display.
    func testWithoutANotificationServerAndDeviceCodeChosenInTheConfiguration() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra, environment: ["DISPLAY": ":99", "BROWSER": TestIdP.fakeBrowser],
                                extraConfig: #"dbus_sign_in = "device-code""#)
        let appLog = bus.directory.path + "/app.log"
        let app = try startApp(entra, ["interactive|\(TestEntra.graph)"], log: appLog)
        let pending = try waitForPendingSignIn(daemon, app: app, appLog: appLog)
        XCTAssertNil(pending["loginHint"], "the app named no account: \(pending)")
        let code = try XCTUnwrap(pending["userCode"] as? String)
        try entra.control("/test/approve-device?user_code=\(code)&username=\(alice)")
        app.waitUntilExit()
        XCTAssertEqual(report(appLog).first?["preferred_username"] as? String, alice, "\(lines(appLog)) \(daemon.log)")
        XCTAssertTrue(daemon.log.contains("no desktop notification: no notification server on the session bus"), daemon.log)
        XCTAssertTrue(daemon.log.contains(#"why=dbus_sign_in = "device-code""#), daemon.log)
        XCTAssertEqual(Set(try entra.tokenRequests().compactMap { $0["grant_type"] as? String }),
                       ["urn:ietf:params:oauth:grant-type:device_code"], "no browser sign-in")
    }

    /// cancelInteractiveFlow (as pymsalruntime sends it) ends a waiting device-code sign-in: msal-python gets its error,
    /// and the pending entry, the event and the notification end with it.
    func testCancelEndsAPendingDeviceCodeSignIn() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra)
        let notificationLog = try startNotificationServer()
        let appLog = bus.directory.path + "/app.log"
        let app = try startApp(entra, ["interactive|\(TestEntra.graph)|\(alice)"], log: appLog)
        _ = try waitForPendingSignIn(daemon, app: app, appLog: appLog)
        let watched = try RawClient(daemon.socket, receiveTimeout: 30)
        XCTAssertNotNil(try watched.call(#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"events":["signInEnded"]}}"#)["result"])
        // The cancel comes from the same app (another process of msal-python's interpreter): a cancel ends only its
        // caller's own sign-ins.
        let cancel = bus.directory.path + "/cancel.json"
        try MSALPythonReachTests.cancelRequest.write(toFile: cancel, atomically: true, encoding: .utf8)
        let canceled = try runCommand(python, [TestIdP.root + "/Tests/dbus/one_connection.py", "call:cancelInteractiveFlow:\(cancel)"],
                                      environment: bus.environment)
        XCTAssertEqual(canceled.status, 0, canceled.stderr)
        let ended = try watched.readMessage()
        XCTAssertEqual(ended["method"] as? String, "signInEnded")
        XCTAssertEqual((ended["params"] as? [String: Any])?["outcome"] as? String, "cancelled", "\(ended)")
        app.waitUntilExit()
        let step = report(appLog).first ?? [:]
        XCTAssertNil(step["access_token_sha256"], "\(step)")
        XCTAssertNotNil(step["error"], "msal-python reports the cancelled sign-in: \(lines(appLog))")
        XCTAssertEqual((try status(daemon)["pendingSignIns"] as? [Any])?.count, 0)
        waitFor("the notification is closed") {
            notifications(notificationLog).map { $0["method"] as? String } == ["Notify", "CloseNotification"]
        }
        XCTAssertFalse(try entra.tokenRequests().contains { $0["status"] as? Int == 200 }, "no token was issued")
    }

    /// A device code that expires ends the call with UserCanceled and the pending entry with `expired`. The request is
    /// sent with busctl in pymsalruntime's shape, with the login hint in `username` (msal-python 1.39 and pymsalruntime
    /// 0.20.7 did not send the hint they were given in these tests), which the status shows.
    func testAnExpiredDeviceCodeEndsTheCallAndTheEntryAndTheHintIsShown() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra)
        let subscriber = try RawClient(daemon.socket, receiveTimeout: 30)
        XCTAssertNotNil(try subscriber.call(#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"events":["signInPending","signInEnded"]}}"#)["result"])
        let request = """
            {"authParameters":{"accessTokenToRenew":"","account":null,"authority":"https://login.microsoftonline.com/common",\
            "authorizationType":6,"clientId":"\(TestEntra.famA)","decodedClaims":"","isSignIn":true,"parentWindow":{"handle":1},\
            "popParams":null,"redirectUri":"https://login.microsoftonline.com/common/oauth2/nativeclient",\
            "requestedScopes":["\(TestEntra.graph)"],"username":"\(alice)","uxContextHandle":-1},"parentWindowHandle":1}
            """
        let answerLog = bus.directory.path + "/busctl.log"
        let call = try start("/usr/bin/busctl", ["--address=\(bus.address)", "--json=short", "call", "com.microsoft.identity.broker1",
                                                 "/com/microsoft/identity/broker1", "com.microsoft.identity.Broker1",
                                                 "acquireTokenInteractively", "sss", "0.0", "cid", request], log: answerLog)
        let announced = try subscriber.readMessage()
        XCTAssertEqual(announced["method"] as? String, "signInPending", "\(announced)")
        let params = announced["params"] as? [String: Any] ?? [:]
        XCTAssertEqual(params["loginHint"] as? String, alice, "\(params)")
        let code = try XCTUnwrap(params["userCode"] as? String)
        XCTAssertFalse(params.keys.contains { $0.lowercased().contains("devicecode") }, "\(params)")
        let human = try daemon.ctl(["status"])
        XCTAssertTrue(human.stdout.contains("enter \(code) (for app \(TestEntra.famA) as \(alice), expires in"), human.stdout)

        try entra.control("/test/expire-device?user_code=\(code)")
        let ended = try subscriber.readMessage()
        XCTAssertEqual(ended["method"] as? String, "signInEnded")
        XCTAssertEqual((ended["params"] as? [String: Any])?["outcome"] as? String, "expired", "\(ended)")
        call.waitUntilExit()
        let reply = lines(answerLog).joined()
        XCTAssertTrue(reply.contains(#"\"status\":7"#), "UserCanceled: \(reply) \(daemon.log)")
        XCTAssertEqual((try status(daemon)["pendingSignIns"] as? [Any])?.count, 0)
    }

    /// The wait has a limit (here `interactive_timeout`; for a D-Bus caller also its 285 s): when it passes, the
    /// device-code sign-in ends as `expired`, its entry goes, and msal-python is answered.
    func testTheWaitLimitEndsADeviceCodeSignIn() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra, interactiveTimeout: 3)
        let subscriber = try RawClient(daemon.socket, receiveTimeout: 60)
        XCTAssertNotNil(try subscriber.call(#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"events":["signInPending","signInEnded"]}}"#)["result"])
        let appLog = bus.directory.path + "/app.log"
        let app = try startApp(entra, ["interactive|\(TestEntra.graph)"], log: appLog)
        let announced = try subscriber.readMessage()
        let expiresOn = (announced["params"] as? [String: Any])?["expiresOn"] as? Int ?? 0
        XCTAssertLessThanOrEqual(expiresOn, Int(Date().timeIntervalSince1970) + 3, "the limit, not the code's 900 s: \(announced)")
        let ended = try subscriber.readMessage()
        XCTAssertEqual((ended["params"] as? [String: Any])?["outcome"] as? String, "expired", "\(ended)")
        app.waitUntilExit()
        XCTAssertNotNil(report(appLog).first?["error"], "\(lines(appLog))")
        XCTAssertEqual((try status(daemon)["pendingSignIns"] as? [Any])?.count, 0)
    }

    /// With a display, D-Bus sign-ins keep using the system browser and the loopback redirect; nothing is pending.
    func testWithADisplayTheBrowserSignsIn() throws {
        let entra = try TestEntra()
        let daemon = try broker(entra, environment: ["DISPLAY": ":99", "BROWSER": TestIdP.fakeBrowser,
                                                     "IDP_BROWSER_LOG": bus.directory.path + "/browser.log"])
        let notificationLog = try startNotificationServer()
        try entra.control("/test/next-signin?username=\(alice)")
        let appLog = bus.directory.path + "/app.log"
        let app = try startApp(entra, ["interactive|\(TestEntra.graph)|\(alice)"], log: appLog)
        app.waitUntilExit()
        XCTAssertEqual(report(appLog).first?["preferred_username"] as? String, alice, "\(lines(appLog)) \(daemon.log)")
        XCTAssertEqual(try entra.tokenRequests().compactMap { $0["grant_type"] as? String }, ["authorization_code"])
        XCTAssertTrue(daemon.log.contains("flow=browser") && daemon.log.contains("why=$DISPLAY is set"), daemon.log)
        XCTAssertEqual(notifications(notificationLog).count, 0, "a browser sign-in needs no notification")
    }
}

private struct NoPendingSignIn: Error {}
