import Foundation
import XCTest

/// brokerd tells apps apart (SPEC §12): clients run in real bubblewrap sandboxes with a `/.flatpak-info` of their own,
/// and on the host, against a real daemon through its socket. The user answers through `brokerctl apps` and through a
/// desktop notification's actions (Tests/dbus/notification_server.py plays the desktop's server; the test clicks).
/// Every case is then looked up in the audit (`brokerctl log`), which must never hold a secret.
final class AppIdentityTests: XCTestCase {
    static let client = "client-a"
    static let alice = CacheFixture.alice
    static let scope = "User.Read"
    static let mailApp = "org.example.Mail"

    private var directory: TemporaryDirectory!

    override func setUp() {
        directory = TemporaryDirectory("brokerd-apps")
    }

    override func tearDown() {
        directory = nil
    }

    private func daemon(_ config: String, bus: PrivateSessionBus? = nil) throws -> Daemon {
        let daemon = try Daemon(config: "background_refresh = false\nallow_root = true\ndbus_broker = false\n" + config)
        if let bus { daemon.environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address }
        try daemon.start()
        let file = directory.path + "/cache.json"
        try CacheFixture.twoAppsTwoAccounts.json.write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try daemon.ctl(["import", file])
        XCTAssertEqual(imported.status, 0, imported.stderr)
        return daemon
    }

    private func sandbox(_ appId: String = mailApp, extraInfo: String = "") throws -> FlatpakSandbox {
        try FlatpakSandbox(appId: appId, in: directory.path, extraInfo: extraInfo)
    }

    private var silent: [String] { ["silent", Self.client, Self.alice, Self.scope] }

    /// `brokerctl log --json` rows, newest first.
    private func audit(_ daemon: Daemon, _ filter: [String] = []) throws -> [[String: Any]] {
        let log = try daemon.ctl(["log", "--json", "--limit", "1000"] + filter)
        XCTAssertEqual(log.status, 0, log.stderr)
        XCTAssertFalse(log.stdout.contains("fake-at") || log.stdout.contains("fake-rt") || log.stdout.contains("fake-idt"),
                       "a secret in brokerctl log")
        let object = try JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [String: Any]
        return object?["entries"] as? [[String: Any]] ?? []
    }

    /// The audit database itself holds no secret either.
    private func assertNoSecretOnDisk(_ daemon: Daemon, file: StaticString = #filePath, line: UInt = #line) {
        for name in ["apps.db", "apps.db-wal"] {
            guard let bytes = FileManager.default.contents(atPath: daemon.stateDir + "/" + name) else { continue }
            XCTAssertNil(bytes.range(of: Data("fake-".utf8)), "a secret in \(name)", file: file, line: line)
        }
    }

    private func status(_ daemon: Daemon) throws -> [String: Any] {
        let status = try daemon.ctl(["status", "--json"])
        return (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]) ?? [:]
    }

    private func pendingConsents(_ daemon: Daemon) throws -> [[String: Any]] {
        try status(daemon)["pendingConsents"] as? [[String: Any]] ?? []
    }

    // MARK: Unsandboxed apps: today's behaviour, on the record

    func testAHostProcessGetsItsTokenAsBeforeAndIsRecordedByExecutable() throws {
        let daemon = try daemon("")
        let answers = try AppClient.run(daemon, silent + ["5"])
        XCTAssertEqual(answers.compactMap { $0["source"] as? String }, Array(repeating: "cache", count: 5), "\(answers)")
        let python = try XCTUnwrap(realExecutable("/usr/bin/python3"))
        var rows: [[String: Any]] = []
        // Repeated hits are counted on the connection and handed to the audit when it closes.
        try waitFor("the hits in the audit") {
            rows = try audit(daemon, ["--app", "exe:\(python)"])
            return rows.reduce(0) { $0 + ($1["count"] as? Int ?? 0) } == 5
        }
        XCTAssertEqual(Set(rows.compactMap { $0["outcome"] as? String }), ["cache"])
        XCTAssertEqual(rows.first?["username"] as? String, "Alice@Contoso.example")
        XCTAssertEqual(rows.first?["clientId"] as? String, Self.client)
        XCTAssertEqual(rows.first?["frontEnd"] as? String, "socket")
        // Two requests in turn on one connection: two rows with their counts, not one a hit.
        let alternating = try AppClient.run(daemon, ["alternate", Self.client, "\(Self.alice),\(CacheFixture.bob)", Self.scope, "20"])
        XCTAssertEqual(alternating.filter { $0["source"] as? String == "cache" }.count, 40, "\(alternating.prefix(2))")
        try waitFor("the alternating hits in the audit") {
            rows = try audit(daemon, ["--app", "exe:\(python)"])
            return rows.reduce(0) { $0 + ($1["count"] as? Int ?? 0) } == 45
        }
        XCTAssertLessThanOrEqual(rows.count, 1 + 2 * 2, "a row per request and window: \(rows.count) rows")
        XCTAssertEqual(Set(rows.compactMap { $0["username"] as? String }), ["Alice@Contoso.example", "bob@contoso.example"])
        let apps = try daemon.ctl(["apps"])
        XCTAssertTrue(apps.stdout.contains("exe:\(python)"), apps.stdout)
        assertNoSecretOnDisk(daemon)
    }

    // MARK: Sandboxed apps

    func testASandboxedAppIsRefusedThenGrantedFromTheNotificationThenFromBrokerctl() throws {
        let bus = try PrivateSessionBus()
        let notifications = directory.path + "/notifications.log"
        let server = try ChildProcess("/usr/bin/python3", [TestIdP.root + "/Tests/dbus/notification_server.py", notifications],
                                      environment: bus.environment, logPath: notifications + ".stderr")
        defer { kill(server.processIdentifier, SIGTERM) }
        try waitFor("the notification server") { try bus.busctl(["status", "org.freedesktop.Notifications"]).status == 0 }
        let daemon = try daemon("consent_timeout = 5\n", bus: bus)
        let app = try sandbox()

        // Nobody answers: refused when the consent times out, with brokerd's error (not InteractionRequired).
        let refused = try app.appClient(daemon, silent)
        XCTAssertEqual(refused.first?["error"] as? Int, -32005, "\(refused)")
        XCTAssertEqual(refused.first?["reason"] as? String, "consentTimedOut")
        let shown = try notificationCalls(notifications).filter { $0["method"] as? String == "Notify" }
        XCTAssertEqual(shown.count, 1, "\(shown)")
        XCTAssertEqual(shown.first?["actions"] as? [String], ["allow", "Allow", "allow-once", "Allow once", "deny", "Deny"])
        XCTAssertTrue((shown.first?["body"] as? String ?? "").contains("flatpak:\(Self.mailApp)"))

        // The user clicks "Allow" on the next notification: the waiting request gets its token.
        let waiting = AppClient.inBackground(app.clientCommand(daemon, silent))
        var id = 0
        try waitFor("a second notification") {
            id = try notificationCalls(notifications).filter { $0["method"] as? String == "Notify" }.last?["id"] as? Int ?? 0
            return id == 2
        }
        XCTAssertEqual(try pendingConsents(daemon).first?["app"] as? String, "flatpak:\(Self.mailApp)")
        let click = try bus.busctl(["call", "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                    "org.brokerd.test.Desktop", "Click", "us", "\(id)", "allow"])
        XCTAssertEqual(click.status, 0, click.stderr)
        XCTAssertEqual(waiting().first?["source"] as? String, "cache")
        try waitFor("the notification closed") {
            try notificationCalls(notifications).contains { $0["method"] as? String == "CloseNotification" && $0["id"] as? Int == id }
        }
        // Granted until revoked: no more questions.
        XCTAssertEqual(try app.appClient(daemon, silent + ["3"]).compactMap { $0["source"] as? String }, ["cache", "cache", "cache"])
        let apps = try daemon.ctl(["apps", "--json"])
        XCTAssertTrue(apps.stdout.contains(#""decision":"allow""#), apps.stdout)

        // Revoked, then granted ahead of time with brokerctl: no question either.
        XCTAssertEqual(try daemon.ctl(["apps", "revoke", "flatpak:\(Self.mailApp)"]).status, 0)
        let allow = try daemon.ctl(["apps", "allow", "flatpak:\(Self.mailApp)", "--client-id", Self.client])
        XCTAssertEqual(allow.status, 0, allow.stderr)
        XCTAssertEqual(try app.appClient(daemon, silent).first?["source"] as? String, "cache")
        XCTAssertEqual(try notificationCalls(notifications).filter { $0["method"] as? String == "Notify" }.count, 2)

        let rows = try audit(daemon, ["--app", "flatpak:\(Self.mailApp)"])
        XCTAssertEqual(rows.filter { $0["outcome"] as? String == "refused" }.count, 1, "\(rows)")
        XCTAssertEqual(rows.filter { $0["outcome"] as? String == "cache" }.reduce(0) { $0 + ($1["count"] as? Int ?? 0) }, 5, "\(rows)")
        assertNoSecretOnDisk(daemon)
    }

    func testAllowOnceARememberedDenialAndARevocation() throws {
        let daemon = try daemon("consent_timeout = 30\n")
        let app = try sandbox()
        let mail = "flatpak:\(Self.mailApp)"
        let watcher = try RawClient(daemon.socket, receiveTimeout: 20)
        _ = try watcher.call(#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"events":["consentPending","consentEnded"]}}"#)

        // "Allow once": the waiting request goes ahead; the next one asks again.
        var waiting = AppClient.inBackground(app.clientCommand(daemon, silent))
        try waitFor("a pending consent") { try pendingConsents(daemon).count == 1 }
        XCTAssertTrue(try daemon.ctl(["status"]).stdout.contains("consent waiting  \(mail) asks for client ID \(Self.client)"))
        XCTAssertEqual(try daemon.ctl(["apps", "allow", mail, "--client-id", Self.client, "--once"]).status, 0)
        XCTAssertEqual(waiting().first?["source"] as? String, "cache")
        let pending = try watcher.readMessage(), ended = try watcher.readMessage()
        XCTAssertEqual(pending["method"] as? String, "consentPending")
        XCTAssertEqual((pending["params"] as? [String: Any])?["app"] as? String, mail)
        XCTAssertEqual(ended["method"] as? String, "consentEnded")
        XCTAssertEqual((ended["params"] as? [String: Any])?["outcome"] as? String, "allowedOnce")
        XCTAssertTrue(try daemon.ctl(["apps", "--json"]).stdout.contains(mail), "the app is listed")
        XCTAssertFalse(try daemon.ctl(["apps", "--json"]).stdout.contains(#""decision""#), "allow once keeps no grant")

        // Asked again; denied; the denial is remembered: refused at once, with no new question.
        waiting = AppClient.inBackground(app.clientCommand(daemon, silent))
        try waitFor("a pending consent") { try pendingConsents(daemon).count == 1 }
        XCTAssertEqual(try daemon.ctl(["apps", "deny", mail, "--client-id", Self.client]).status, 0)
        XCTAssertEqual(waiting().first?["reason"] as? String, "denied")
        let again = try app.appClient(daemon, silent)
        XCTAssertEqual(again.first?["reason"] as? String, "denied", "\(again)")
        XCTAssertTrue(try pendingConsents(daemon).isEmpty)
        // "Allow once" answers only a waiting request.
        let once = try daemon.ctl(["apps", "allow", mail, "--client-id", Self.client, "--once"])
        XCTAssertNotEqual(once.status, 0)
        XCTAssertTrue(once.stderr.contains("waiting"), once.stderr)

        // Revoked: the app is asked again (and here refused when the test stops waiting).
        XCTAssertEqual(try daemon.ctl(["apps", "revoke", mail, "--client-id", Self.client]).status, 0)
        waiting = AppClient.inBackground(app.clientCommand(daemon, silent))
        try waitFor("a pending consent after the revocation") { try pendingConsents(daemon).count == 1 }
        XCTAssertEqual(try daemon.ctl(["apps", "deny", mail, "--client-id", Self.client]).status, 0)
        _ = waiting()

        let outcomes = try audit(daemon, ["--app", mail]).map { "\($0["outcome"] ?? "")" }
        XCTAssertEqual(outcomes.reversed(), ["cache", "refused", "refused", "refused"], "oldest first")
        // Revoking deleted no token: a host process still gets it.
        XCTAssertEqual(try AppClient.run(daemon, silent).first?["source"] as? String, "cache")
    }

    func testSandboxedAppsDenyRefusesWithoutAskingAndAGrantLimitsScopes() throws {
        let daemon = try daemon("sandboxed_apps = \"deny\"\n")
        let app = try sandbox()
        let mail = "flatpak:\(Self.mailApp)"
        XCTAssertEqual(try app.appClient(daemon, silent).first?["reason"] as? String, "sandboxedAppsDenied")
        XCTAssertTrue(try pendingConsents(daemon).isEmpty)
        // A grant limited to Mail.* scopes does not cover User.Read.
        XCTAssertEqual(try daemon.ctl(["apps", "allow", mail, "--client-id", Self.client, "--scope", "Mail.*"]).status, 0)
        XCTAssertEqual(try app.appClient(daemon, silent).first?["reason"] as? String, "outsideGrant")
        XCTAssertEqual(try daemon.ctl(["apps", "allow", mail, "--client-id", Self.client, "--account", "alice@contoso.example"]).status, 0)
        XCTAssertEqual(try app.appClient(daemon, silent).first?["source"] as? String, "cache")
        // Another account than the grant's: refused.
        let bob = try app.appClient(daemon, ["silent", Self.client, CacheFixture.bob, Self.scope])
        XCTAssertEqual(bob.first?["reason"] as? String, "outsideGrant", "\(bob)")
        // The admin methods are not for a sandboxed app: it cannot export every token or grant itself.
        let sandboxDir = (daemon.socket as NSString).deletingLastPathComponent
        let ctl = app.command(["/usr/bin/python3", "-c", """
            import json, socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("r")
            for method, params in [("exportCache", {}), ("setAppAccess", {"app": "flatpak:x.y.z", "clientId": "c", "decision": "allow"})]:
                s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) + "\\n").encode())
                print(json.loads(f.readline())["error"]["code"])
            """, daemon.socket], binds: [sandboxDir])
        let admin = try runCommand(ctl[0], Array(ctl.dropFirst()))
        XCTAssertEqual(admin.stdout.split(separator: "\n"), ["-32005", "-32005"], admin.stderr)
        assertNoSecretOnDisk(daemon)
    }

    // MARK: Pins

    func testAPinnedClientIdIsRefusedToAnotherExecutable() throws {
        let python = try XCTUnwrap(realExecutable("/usr/bin/python3"))
        let daemon = try daemon("""
            [[pin]]
            client_id = "\(Self.client)"
            executables = ["\(python)"]
            """)
        XCTAssertEqual(try AppClient.run(daemon, silent).first?["source"] as? String, "cache")
        // brokerctl is another executable: refused, whatever unsandboxed_apps says.
        let token = try daemon.ctl(["token", "--client-id", Self.client, "--authority",
                                    "https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001",
                                    "--scope", Self.scope, "--account", Self.alice])
        XCTAssertNotEqual(token.status, 0)
        XCTAssertTrue(token.stderr.contains("pinned"), token.stderr)
        // Another client ID is not pinned: brokerctl gets it.
        let other = try daemon.ctl(["token", "--client-id", "client-b", "--authority",
                                    "https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001",
                                    "--scope", "Mail.Read", "--account", Self.alice])
        XCTAssertEqual(other.status, 0, other.stderr)
        let refused = try audit(daemon, ["--client-id", Self.client]).filter { $0["outcome"] as? String == "refused" }
        XCTAssertEqual(refused.count, 1)
        XCTAssertTrue((refused.first?["app"] as? String ?? "").hasSuffix("/brokerctl"), "\(refused)")
        XCTAssertTrue((refused.first?["detail"] as? String ?? "").hasPrefix("pinnedToOtherApps"), "\(refused)")
    }

    // MARK: What must not count

    /// A host process cannot make itself a Flatpak app by writing `/.flatpak-info` into the host's own root: brokerd
    /// reads it only through a root other than its own.
    func testAForgedFlatpakInfoInTheHostsOwnRootDoesNotCount() throws {
        guard access("/", W_OK) == 0 else { throw missing("writing /.flatpak-info needs root") }
        let daemon = try daemon("sandboxed_apps = \"deny\"\n")
        let forged = "/.flatpak-info"
        XCTAssertFalse(FileManager.default.fileExists(atPath: forged), "a /.flatpak-info is already on this machine")
        try "[Application]\nname=org.example.Forged\n\n[Instance]\ninstance-id=1\n".write(toFile: forged, atomically: false, encoding: .utf8)
        defer { unlink(forged) }
        let answers = try AppClient.run(daemon, silent)
        XCTAssertEqual(answers.first?["source"] as? String, "cache", "\(answers)")
        let rows = try audit(daemon)
        XCTAssertTrue((rows.first?["app"] as? String ?? "").hasPrefix("exe:"), "\(rows)")
        XCTAssertFalse(try daemon.ctl(["apps"]).stdout.contains("Forged"))
    }

    /// The identity belongs to the connection: a sandboxed app that hands its connection to a child and exits, its pid
    /// then given to a host process, is still that app (here refused), never the host process now at that pid.
    func testAConnectionKeepsItsIdentityWhenItsPidIsReused() throws {
        guard access("/proc/sys/kernel/ns_last_pid", W_OK) == 0 else { throw missing("reusing a pid needs root") }
        let daemon = try daemon("sandboxed_apps = \"deny\"\n")
        let app = try sandbox()
        let go = directory.path + "/go"
        let output = directory.path + "/handover.log"
        let socketDirectory = (daemon.socket as NSString).deletingLastPathComponent
        // The sandbox shares the host's pid namespace here, so that its pid is one the host can be given.
        let command = app.command(["/usr/bin/python3", "/app/tests/app_client.py", daemon.socket, "handover", Self.client,
                                   Self.alice, Self.scope, go], binds: [socketDirectory, directory.path], sharePid: true)
        let parent = try ChildProcess(command[0], Array(command.dropFirst()), environment: [:], logPath: output)
        var lines: [[String: Any]] = []
        try waitFor("the app's pid") {
            lines = AppClient.answers((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
            return lines.count >= 2
        }
        let pid = try XCTUnwrap(lines[1]["parent"] as? Int32 ?? (lines[1]["parent"] as? Int).map(Int32.init))
        parent.waitUntilExit()  // bwrap, and with it the python parent, has exited; the child holds the connection
        try waitFor("pid \(pid) free") { kill(pid, 0) != 0 }
        var impostor: ChildProcess?
        for _ in 0..<20 where impostor == nil {
            try "\(pid - 1)".write(toFile: "/proc/sys/kernel/ns_last_pid", atomically: false, encoding: .utf8)
            let candidate = try ChildProcess("/usr/bin/sleep", ["60"], environment: [:], logPath: "/dev/null")
            if candidate.processIdentifier == pid { impostor = candidate } else { kill(candidate.processIdentifier, SIGKILL) }
        }
        let host = try XCTUnwrap(impostor, "no host process got pid \(pid)")
        defer { kill(host.processIdentifier, SIGKILL) }
        FileManager.default.createFile(atPath: go, contents: nil)
        try waitFor("the child's answer") {
            AppClient.answers((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").count >= 3
        }
        let answer = AppClient.answers(try String(contentsOfFile: output, encoding: .utf8))[2]
        XCTAssertEqual(answer["reason"] as? String, "sandboxedAppsDenied", "\(answer)")
        let row = try XCTUnwrap(try audit(daemon).first)
        XCTAssertEqual(row["app"] as? String, "flatpak:\(Self.mailApp)")
        XCTAssertEqual(row["pid"] as? Int32 ?? (row["pid"] as? Int).map(Int32.init), pid)
    }

    /// A Flatpak that can reach the host's session bus can run anything on the host: it counts as a host process.
    func testAFlatpakWithSessionBusAccessCountsAsAHostProcess() throws {
        let daemon = try daemon("sandboxed_apps = \"deny\"\n")
        let app = try sandbox(extraInfo: "[Context]\nsockets=wayland;session-bus;\n")
        XCTAssertEqual(try app.appClient(daemon, silent).first?["source"] as? String, "cache")
        XCTAssertTrue((try audit(daemon).first?["app"] as? String ?? "").hasPrefix("exe:"))
    }

    // MARK: Support

    private func notificationCalls(_ path: String) throws -> [[String: Any]] {
        AppClient.answers((try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
    }

    private func realExecutable(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
