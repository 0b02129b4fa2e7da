import Foundation
import XCTest

/// Sandboxed apps on the D-Bus front end, as Flatpak connects them: the app reaches the session bus only through
/// xdg-dbus-proxy (Debian `xdg-dbus-proxy`, Flatpak's bus filter) with `--talk=com.microsoft.identity.broker1`, and the
/// proxy runs in a sandbox that carries the app's `/.flatpak-info`. The bus reports the proxy as the sender; brokerd
/// reads the app's ID through the proxy's root. A proxy run on the host is an ordinary host process to brokerd.
final class AppIdentityDBusTests: XCTestCase {
    private var bus: PrivateSessionBus!
    private var directory: TemporaryDirectory!
    private var processes: [ChildProcess] = []
    static let mailApp = "org.example.Mail"

    override func setUpWithError() throws {
        bus = try PrivateSessionBus()
        directory = TemporaryDirectory("brokerd-apps-dbus")
    }

    override func tearDown() {
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        processes = []
        bus = nil
        directory = nil
    }

    private func daemon(_ config: String) throws -> Daemon {
        let daemon = try Daemon(config: "background_refresh = false\nallow_root = true\n" + config)
        daemon.environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        daemon.extraArguments = ["--dbus-broker"]
        try daemon.start()
        let file = directory.path + "/cache.json"
        try CacheFixture.twoAppsTwoAccounts.json
            .replacingOccurrences(of: "fake-idt-alice-a", with: Self.idToken("Alice@Contoso.example"))
            .write(toFile: file, atomically: true, encoding: .utf8)
        XCTAssertEqual(try daemon.ctl(["import", file]).status, 0)
        try bus.waitForBroker()
        return daemon
    }

    /// A JWT with the claims MSAL clients read (unsigned: clients do not check it).
    static func idToken(_ username: String) -> String {
        func part(_ json: String) -> String {
            Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        return part(#"{"alg":"none","typ":"JWT"}"#) + "." + part("""
            {"preferred_username":"\(username)","oid":"00000000-0000-0000-0000-0000000a11ce","tid":"72f988bf-0000-0000-0000-000000000001"}
            """) + "."
    }

    /// xdg-dbus-proxy in front of the private bus, letting through com.microsoft.identity.broker1 (and `talk`) only: in
    /// `sandbox` (as `flatpak run` starts it) or on the host. Returns the proxy's socket.
    private func startProxy(in sandbox: FlatpakSandbox?, talk: [String] = []) throws -> String {
        let proxy = try requireTool("/usr/bin/xdg-dbus-proxy", package: "xdg-dbus-proxy")
        let socket = directory.path + "/proxy-\(processes.count)"
        var command = [proxy, bus.address, socket, "--filter", "--talk=com.microsoft.identity.broker1"] + talk.map { "--talk=\($0)" }
        if let sandbox {
            command = sandbox.command(command, binds: [bus.directory.path, directory.path], sharePid: true)
        }
        processes.append(try ChildProcess(command[0], Array(command.dropFirst()), environment: [:],
                                          logPath: directory.path + "/proxy.log"))
        try waitFor("the proxy's socket") { FileManager.default.fileExists(atPath: socket) }
        return socket
    }

    /// acquireTokenSilently through `proxySocket` with libdbus (Tests/apps/dbus_call.py), run inside `sandbox` (the app)
    /// with the proxy's socket as its session bus, as a Flatpak app has it at /run/flatpak/bus. (Debian 12's
    /// xdg-dbus-proxy 0.1.4 cannot carry sd-bus clients such as busctl: "Invalid message header read".)
    private func silentThroughProxy(_ proxySocket: String, app sandbox: FlatpakSandbox) throws -> [String: Any]? {
        let request = """
            {"authParameters":{"account":{"homeAccountId":"\(CacheFixture.alice)"},\
            "authority":"https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001","authorizationType":1,\
            "clientId":"client-a","decodedClaims":"","requestedScopes":["User.Read"]}}
            """
        let command = sandbox.command(["/usr/bin/python3", "/app/tests/dbus_call.py", "unix:path=/run/flatpak/bus",
                                       "acquireTokenSilently", request], bindsAt: [(proxySocket, "/run/flatpak/bus")])
        let result = try runCommand(command[0], Array(command.dropFirst()))
        XCTAssertEqual(result.status, 0, result.stderr)
        return (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any]
    }

    private func response(_ answer: [String: Any]?) -> [String: Any] {
        answer?["brokerTokenResponse"] as? [String: Any] ?? [:]
    }

    private func audit(_ daemon: Daemon) throws -> [[String: Any]] {
        let log = try daemon.ctl(["log", "--json"])
        XCTAssertFalse(log.stdout.contains("fake-at"), "a secret in brokerctl log")
        return ((try JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [String: Any])?["entries"] as? [[String: Any]]) ?? []
    }

    func testASandboxedAppBehindItsSandboxedProxyIsToldApartAndGrantedWithBrokerctl() throws {
        let daemon = try daemon("sandboxed_apps = \"deny\"\n")
        let app = try FlatpakSandbox(appId: Self.mailApp, in: directory.path)
        let proxy = try startProxy(in: app)

        // Refused with status 9, which msal-python returns as an error: not 2 or 13 (a sign-in), never 23 (a retry loop).
        let refused = response(try silentThroughProxy(proxy, app: app))["error"] as? [String: Any]
        XCTAssertEqual(refused?["status"] as? Int, 9, "\(String(describing: refused))")
        XCTAssertTrue((refused?["context"] as? String ?? "").contains("flatpak:\(Self.mailApp)"), "\(String(describing: refused))")

        XCTAssertEqual(try daemon.ctl(["apps", "allow", "flatpak:\(Self.mailApp)", "--client-id", "client-a"]).status, 0)
        let granted = response(try silentThroughProxy(proxy, app: app))
        XCTAssertNotNil(granted["accessToken"], "\(granted.keys)")
        XCTAssertEqual(try audit(daemon).prefix(2).map { "\($0["frontEnd"] ?? "") \($0["app"] ?? "") \($0["outcome"] ?? "")" },
                       ["dbus flatpak:\(Self.mailApp) cache", "dbus flatpak:\(Self.mailApp) refused"])

        // Another app's sandbox and proxy: its own identity, no grant.
        let other = try FlatpakSandbox(appId: "org.example.Other", in: directory.path)
        let otherProxy = try startProxy(in: other)
        XCTAssertEqual((response(try silentThroughProxy(otherProxy, app: other))["error"] as? [String: Any])?["status"] as? Int, 9)
    }

    /// A proxy on the host is xdg-dbus-proxy to brokerd, whatever app is behind it: it cannot be told apart (docs/security.md).
    func testAProxyOnTheHostIsAHostProcess() throws {
        let daemon = try daemon("sandboxed_apps = \"deny\"\n")
        let app = try FlatpakSandbox(appId: Self.mailApp, in: directory.path)
        let proxy = try startProxy(in: nil)
        XCTAssertNotNil(response(try silentThroughProxy(proxy, app: app))["accessToken"])
        XCTAssertEqual(try audit(daemon).first?["app"] as? String, "exe:/usr/bin/xdg-dbus-proxy")
    }

    /// The real msal-python + pymsalruntime as a Flatpak app would run it: in a sandbox of its own, its session bus the
    /// xdg-dbus-proxy that runs in the same app's sandbox and lets through brokerd's name and the Secret Service
    /// (pymsalruntime keeps its own cache there). Refused first (msal-python gets status 9 as an error and starts no
    /// sign-in of its own), then granted with brokerctl, then signed in through brokerd.
    func testTheRealMSALPythonInAFlatpakSandbox() throws {
        let python = try msalPython()
        try bus.startSecretService()
        let entra = try TestEntra()
        let daemon = try Daemon(config: entra.brokerConfig + "\nsandboxed_apps = \"deny\"\n")
        daemon.environment = ["BROWSER": TestIdP.fakeBrowser, "IDP_BROWSER_LOG": entra.directory.path + "/browser.log",
                              "DBUS_SESSION_BUS_ADDRESS": bus.address]
        daemon.extraArguments = ["--dbus-broker"]
        try daemon.start()
        try bus.waitForBroker()
        let app = try FlatpakSandbox(appId: "org.example.MsalApp", in: directory.path)
        let proxy = try startProxy(in: app, talk: ["org.freedesktop.secrets"])
        // The venv and the Python it was made from (pyenv's or Debian's) are bound in read-only, as a Flatpak's runtime.
        let interpreter = try XCTUnwrap(realpath(python, nil).map { path -> String in
            defer { free(path) }
            return String(cString: path)
        })
        let prefix = ((interpreter as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        let venv = ((python as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        let home = directory.path + "/home"
        try FileManager.default.createDirectory(atPath: home + "/run", withIntermediateDirectories: true)
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/run/flatpak/bus"
        environment["HOME"] = home
        environment["XDG_RUNTIME_DIR"] = home + "/run"
        func run(_ steps: [String]) throws -> [[String: Any]] {
            let command = app.command([python, TestIdP.root + "/Tests/dbus/msal_app.py", entra.http, TestEntra.famA] + steps,
                                      binds: [home], bindsAt: [(proxy, "/run/flatpak/bus")])
                .flatMap { $0 == "--die-with-parent" ? ["--ro-bind", prefix, prefix, "--ro-bind", venv, venv,
                                                          "--ro-bind", TestIdP.root + "/Tests/dbus", TestIdP.root + "/Tests/dbus",
                                                          "--die-with-parent"] : [$0] }
            let result = try runCommand(command[0], Array(command.dropFirst()), environment: environment)
            XCTAssertEqual(result.status, 0, result.stderr)
            return (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [[String: Any]] ?? []
        }
        try entra.control("/test/next-signin?username=alice@contoso.example")
        let refused = try run(["interactive|\(TestEntra.graph)|alice@contoso.example"])
        XCTAssertNil(refused.first?["access_token_sha256"], "\(refused)")
        XCTAssertTrue((refused.first?["error_description"] as? String ?? "").contains("IncorrectConfiguration"), "\(refused)")
        XCTAssertTrue(try entra.tokenRequests().isEmpty, "no sign-in was started")

        XCTAssertEqual(try daemon.ctl(["apps", "allow", "flatpak:org.example.MsalApp", "--client-id", TestEntra.famA]).status, 0)
        let granted = try run(["interactive|\(TestEntra.graph)|alice@contoso.example"])
        XCTAssertEqual(granted.first?["token_source"] as? String, "broker", "\(granted) \(daemon.log)")
        XCTAssertEqual(granted.first?["preferred_username"] as? String, "alice@contoso.example")
        let rows = try audit(daemon).filter { $0["app"] as? String == "flatpak:org.example.MsalApp" }
        XCTAssertEqual(rows.first?["outcome"] as? String, "interactive", "\(rows)")
        XCTAssertEqual(rows.first?["frontEnd"] as? String, "dbus")
        XCTAssertTrue(rows.contains { $0["outcome"] as? String == "refused" }, "\(rows)")
    }

    /// `cancelInteractiveFlow` names no flow. From a sandboxed app it ends that app's sign-ins only: a Flatpak cannot end
    /// the sign-in another app is waiting on. (A host process's cancel still ends every D-Bus sign-in: issue #28.)
    func testASandboxedAppsCancelEndsOnlyItsOwnSignIns() throws {
        let entra = try TestEntra()
        let daemon = try Daemon(config: entra.brokerConfig + "\ndbus_sign_in = \"device-code\"\n")
        daemon.environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address]
        daemon.extraArguments = ["--dbus-broker"]
        try daemon.start()
        try bus.waitForBroker()
        let request = """
            {"authParameters":{"account":null,"authority":"https://login.microsoftonline.com/common","authorizationType":6,\
            "clientId":"\(TestEntra.famA)","decodedClaims":"","requestedScopes":["\(TestEntra.graph)"],"username":"alice@contoso.example"}}
            """
        // A host app's sign-in, waiting for the user to enter its device code.
        final class Box: @unchecked Sendable { var output = "" }
        let box = Box(), done = DispatchSemaphore(value: 0)
        let call = ["/usr/bin/busctl", "--address=\(bus.address)", "--json=short", "call", DBusName.name, DBusName.path,
                    DBusName.interface, "acquireTokenInteractively", "sss", "0.0", "c0ffee00-0000-0000-0000-000000000001", request]
        DispatchQueue.global().async {
            box.output = (try? runCommand(call[0], Array(call.dropFirst())))?.stdout ?? ""
            done.signal()
        }
        func pending() throws -> Int {
            let status = try daemon.ctl(["status", "--json"])
            let object = (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8))) as? [String: Any]
            return (object?["pendingSignIns"] as? [Any])?.count ?? 0
        }
        try waitFor("the host app's sign-in waiting") { try pending() == 1 }

        let app = try FlatpakSandbox(appId: Self.mailApp, in: directory.path)
        let proxy = try startProxy(in: app)
        let cancel = app.command(["/usr/bin/python3", "/app/tests/dbus_call.py", "unix:path=/run/flatpak/bus",
                                  "cancelInteractiveFlow", "{}"], bindsAt: [(proxy, "/run/flatpak/bus")])
        let answered = try runCommand(cancel[0], Array(cancel.dropFirst()))
        XCTAssertEqual(answered.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "{}", answered.stderr)
        // The cancel is answered once done: the other app's sign-in still waits.
        XCTAssertEqual(try pending(), 1, "a sandboxed app's cancel ended another app's sign-in")

        XCTAssertNotNil(try bus.broker1("cancelInteractiveFlow", "{}").answer)
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        let reply = (try? JSONSerialization.jsonObject(with: Data(box.output.utf8))) as? [String: Any]
        let text = (reply?["data"] as? [String])?.first ?? ""
        let answer = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
        let error = (answer?["brokerTokenResponse"] as? [String: Any])?["error"] as? [String: Any]
        XCTAssertEqual(error?["status"] as? Int, 7, "the host's cancel ends it: UserCanceled")
    }
}
