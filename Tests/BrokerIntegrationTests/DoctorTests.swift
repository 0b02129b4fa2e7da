import BrokerProtocol
import Foundation
import XCTest

/// `brokerctl doctor` on a healthy setup and on each broken one it claims to diagnose, all built from real parts: a
/// real brokerd, the test IdP, private session buses with gnome-keyring, real file modes. And `brokerctl version`
/// without a daemon.
final class DoctorTests: XCTestCase {
    private struct Finding {
        var id: String
        var status: String
        var message: String
        var fix: String?
        var subject: String?
    }

    private struct Report {
        var exitStatus: Int32
        var findings: [Finding]
        var raw: String

        func all(_ id: String) -> [Finding] { findings.filter { $0.id == id } }
        func one(_ id: String, file: StaticString = #filePath, line: UInt = #line) throws -> Finding {
            try XCTUnwrap(all(id).first, "no \(id) finding in \(raw)", file: file, line: line)
        }
    }

    /// doctor's environment: the user's directories inside `home` (so that the machine's config, state and systemd
    /// user manager stay out of it), and `bus` as the session bus (none by default).
    private func environment(home: String, bus: String? = nil) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in ["DISPLAY", "WAYLAND_DISPLAY", "BROKERD_SOCKET", "STATE_DIRECTORY"] { environment.removeValue(forKey: name) }
        environment["HOME"] = home
        environment["XDG_CONFIG_HOME"] = home + "/config"
        environment["XDG_STATE_HOME"] = home + "/state"
        environment["XDG_RUNTIME_DIR"] = home + "/run"
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus ?? "unix:path=\(home)/no-session-bus"
        return environment
    }

    private func doctor(socket: String, home: String, bus: String? = nil, extra: [String] = [],
                        file: StaticString = #filePath, line: UInt = #line) throws -> Report {
        let result = try runCommand(Binaries.brokerctl, ["doctor", "--json", "--socket", socket] + extra,
                                    environment: environment(home: home, bus: bus))
        let object = try XCTUnwrap(try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                                   "doctor --json printed no JSON object: \(result.stdout) \(result.stderr)", file: file, line: line)
        let findings = (object["findings"] as? [[String: Any]] ?? []).map {
            Finding(id: $0["id"] as? String ?? "", status: $0["status"] as? String ?? "", message: $0["message"] as? String ?? "",
                    fix: $0["fix"] as? String, subject: $0["subject"] as? String)
        }
        XCTAssertFalse(findings.isEmpty, result.stdout, file: file, line: line)
        for finding in findings {
            XCTAssertTrue(["ok", "warning", "error"].contains(finding.status), "\(finding)", file: file, line: line)
            XCTAssertFalse(finding.id.isEmpty || finding.message.isEmpty, "\(finding)", file: file, line: line)
            if finding.status != "ok" { XCTAssertNotNil(finding.fix, "a problem without a fix: \(finding)", file: file, line: line) }
        }
        XCTAssertEqual(object["errors"] as? Int, findings.filter { $0.status == "error" }.count, file: file, line: line)
        return Report(exitStatus: result.status, findings: findings, raw: result.stdout)
    }

    /// The checks that run whatever state brokerd is in.
    private let localChecks = ["brokerd.reachable", "socket.directory", "config", "dbus.name", "keystore", "browser",
                               "clock.skew", "disk.space"]

    // MARK: Healthy

    func testHealthySetupExitsZeroWithEveryCheckOk() throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)

        let report = try doctor(socket: daemon.socket, home: daemon.directory.path)
        XCTAssertEqual(report.exitStatus, 0, report.raw)
        for id in localChecks { XCTAssertEqual(try report.one(id).status, "ok", "\(report.all(id))") }
        XCTAssertTrue(try report.one("brokerd.reachable").message.contains("pid \(daemon.pid)"), report.raw)
        // No systemd user manager and no session bus in this environment: said so, as fine.
        XCTAssertTrue(try report.one("systemd.units").message.contains("cannot ask systemd"), report.raw)
        XCTAssertTrue(try report.one("dbus.name").message.contains("no session bus"), report.raw)
        XCTAssertTrue(try report.one("keystore").message.contains("file"), report.raw)
        XCTAssertTrue(try report.one("browser").message.contains("$BROWSER"), "the scripted browser is brokerd's: \(report.raw)")
        // The discovery document login fetched, with its age, and the IdP accepting connections from here.
        let discovery = try report.one("network.discovery")
        XCTAssertEqual(discovery.status, "ok", report.raw)
        XCTAssertTrue(discovery.subject?.hasPrefix(idp.http) ?? false, "\(discovery)")
        XCTAssertTrue(discovery.message.contains("learned") && discovery.message.contains("accepts connections"), discovery.message)
        XCTAssertTrue(report.all("network.unreachable").isEmpty, report.raw)
        XCTAssertEqual(try report.one("signIn.pending").status, "ok")
        XCTAssertTrue(report.findings.allSatisfy { $0.status != "error" }, report.raw)

        let text = try runCommand(Binaries.brokerctl, ["doctor", "--socket", daemon.socket],
                                  environment: environment(home: daemon.directory.path))
        XCTAssertEqual(text.status, 0, text.stdout)
        XCTAssertTrue(text.stdout.contains("ok       brokerd \(brokerVersion)"), text.stdout)
    }

    // MARK: brokerd not running

    func testWithoutBrokerdEveryLocalCheckRunsAndSaysHowToStartIt() throws {
        let home = TemporaryDirectory("brokerd-doctor")
        let socket = home.path + "/run/brokerd/brokerd.sock"
        let report = try doctor(socket: socket, home: home.path)
        XCTAssertEqual(report.exitStatus, 1, report.raw)
        let reachable = try report.one("brokerd.reachable")
        XCTAssertEqual(reachable.status, "error")
        XCTAssertTrue(reachable.message.contains(socket), reachable.message)
        XCTAssertTrue(reachable.fix?.contains("systemctl --user enable --now brokerd.socket") ?? false, "\(reachable)")
        for id in localChecks { XCTAssertFalse(report.all(id).isEmpty, "\(id) did not run without brokerd: \(report.raw)") }
        XCTAssertEqual(report.findings.filter { $0.status == "error" }.map(\.id), ["brokerd.reachable"], report.raw)

        let text = try runCommand(Binaries.brokerctl, ["doctor", "--socket", socket], environment: environment(home: home.path))
        XCTAssertEqual(text.status, 1)
        XCTAssertTrue(text.stdout.contains("ERROR    brokerd does not answer on \(socket)"), text.stdout)
        XCTAssertTrue(text.stdout.contains("fix: Start brokerd"), text.stdout)
    }

    /// A brokerd killed with SIGKILL leaves its socket behind: doctor tells the stale socket from a missing one.
    func testAStaleSocketIsNamed() throws {
        let daemon = try Daemon()
        try daemon.start()
        daemon.stop(SIGKILL)
        XCTAssertTrue(FileManager.default.fileExists(atPath: daemon.socket), "SIGKILL leaves the socket")
        let report = try doctor(socket: daemon.socket, home: daemon.directory.path)
        XCTAssertEqual(report.exitStatus, 1)
        let socketFile = try report.one("socket.file")
        XCTAssertEqual(socketFile.status, "error", report.raw)
        XCTAssertTrue(socketFile.message.contains("nobody answers"), socketFile.message)
        XCTAssertTrue(socketFile.fix?.contains("rm \(daemon.socket)") ?? false, "\(socketFile)")
    }

    // MARK: Socket permissions

    func testASocketDirectoryOthersCanWriteToIsAnError() throws {
        let daemon = try Daemon()
        try daemon.start()
        let directory = (daemon.socket as NSString).deletingLastPathComponent
        defer { chmod(directory, 0o700) }

        XCTAssertEqual(chmod(directory, 0o777), 0)
        var report = try doctor(socket: daemon.socket, home: daemon.directory.path)
        XCTAssertEqual(report.exitStatus, 1, report.raw)
        var finding = try report.one("socket.directory")
        XCTAssertEqual(finding.status, "error")
        XCTAssertTrue(finding.message.contains("writable by your group and everyone") && finding.message.contains("0777"), finding.message)
        XCTAssertEqual(finding.fix, "chmod 700 \(directory)")

        // Readable by others but not writable: a warning, which alone leaves the exit status 0 (1 with --strict).
        XCTAssertEqual(chmod(directory, 0o755), 0)
        report = try doctor(socket: daemon.socket, home: daemon.directory.path)
        finding = try report.one("socket.directory")
        XCTAssertEqual(finding.status, "warning", report.raw)
        XCTAssertEqual(report.exitStatus, 0, report.raw)
        XCTAssertEqual(try doctor(socket: daemon.socket, home: daemon.directory.path, extra: ["--strict"]).exitStatus, 1)

        XCTAssertEqual(chmod(directory, 0o700), 0)
        XCTAssertEqual(try doctor(socket: daemon.socket, home: daemon.directory.path).one("socket.directory").status, "ok")
    }

    /// Without a Secret Service the cache key is a file: readable by others, it is an error.
    func testAKeyFileOthersCanReadIsAnError() throws {
        let daemon = try Daemon()
        try daemon.start()
        let keyFile = daemon.stateDir + "/cache.key"
        XCTAssertEqual(try doctor(socket: daemon.socket, home: daemon.directory.path).one("keystore").status, "ok")
        XCTAssertEqual(chmod(keyFile, 0o644), 0)
        let report = try doctor(socket: daemon.socket, home: daemon.directory.path)
        let keyStore = try report.one("keystore")
        XCTAssertEqual(keyStore.status, "error", report.raw)
        XCTAssertTrue(keyStore.message.contains("\(keyFile) is mode 0644"), keyStore.message)
        XCTAssertTrue(keyStore.fix?.hasPrefix("chmod 600 \(keyFile)") ?? false, "\(keyStore)")
        XCTAssertEqual(report.exitStatus, 1)
    }

    // MARK: D-Bus

    /// Two brokerds on one private session bus: the first owns com.microsoft.identity.broker1, and doctor, asked
    /// about the second, names the first as the owner.
    func testAnotherOwnerOfTheBrokerNameIsNamed() throws {
        let bus = try PrivateSessionBus()
        let first = try Daemon()
        first.environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address]
        try first.start()
        try bus.waitForBroker()
        let second = try Daemon()
        second.environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address]
        try second.start()
        waitFor("the second brokerd sees the name taken") { second.log.contains("another process owns") }

        let owner = try doctor(socket: first.socket, home: first.directory.path, bus: bus.address).one("dbus.name")
        XCTAssertEqual(owner.status, "ok")
        XCTAssertTrue(owner.message.contains("brokerd (pid \(first.pid)) owns com.microsoft.identity.broker1"), owner.message)

        let report = try doctor(socket: second.socket, home: second.directory.path, bus: bus.address)
        XCTAssertEqual(report.exitStatus, 1, report.raw)
        let other = try report.one("dbus.name")
        XCTAssertEqual(other.status, "error")
        XCTAssertTrue(other.message.contains("pid \(first.pid) (\(Binaries.brokerd))"), other.message)
        XCTAssertTrue(other.message.contains("not this brokerd (pid \(second.pid))"), other.message)
        XCTAssertTrue(other.message.contains("another process owns"), "brokerd's own view is quoted: \(other.message)")

        // The owner goes: nobody owns the name (brokerd never takes it later), a warning with the restart as fix.
        first.stop()
        waitFor("the name is free") { (try? bus.busctl(["status", DBusName.name]).status) != 0 }
        let nobody = try doctor(socket: second.socket, home: second.directory.path, bus: bus.address).one("dbus.name")
        XCTAssertEqual(nobody.status, "warning")
        XCTAssertTrue(nobody.message.contains("nobody owns"), nobody.message)
        XCTAssertTrue(nobody.fix?.contains("systemctl --user restart brokerd.service") ?? false, "\(nobody)")
    }

    // MARK: Secret Service

    func testALockedSecretServiceIsAWarningWhileBrokerdRunsAndAnErrorOnceItStopped() throws {
        let bus = try PrivateSessionBus()
        try bus.startSecretService()
        let daemon = try Daemon(config: "background_refresh = false\n")
        daemon.environment = bus.environment
        try daemon.start()
        var report = try doctor(socket: daemon.socket, home: daemon.directory.path, bus: bus.address)
        var keyStore = try report.one("keystore")
        XCTAssertEqual(keyStore.status, "ok", report.raw)
        XCTAssertTrue(keyStore.message.contains("secret-service") && keyStore.message.contains("unlocked"), keyStore.message)

        let lock = try bus.busctl(["call", "org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.Secret.Service",
                                   "Lock", "ao", "1", "/org/freedesktop/secrets/collection/login"])
        XCTAssertEqual(lock.status, 0, lock.stderr)
        // brokerd holds its key while it runs: a warning, for its next start.
        report = try doctor(socket: daemon.socket, home: daemon.directory.path, bus: bus.address)
        keyStore = try report.one("keystore")
        XCTAssertEqual(keyStore.status, "warning", report.raw)
        XCTAssertTrue(keyStore.message.contains("locked") && keyStore.message.contains("when it starts again"), keyStore.message)
        XCTAssertTrue(keyStore.fix?.contains("Unlock your keyring") ?? false, "\(keyStore)")

        // Stopped, brokerd cannot start again (KeyStoreTests: exit status 75): an error.
        XCTAssertEqual(daemon.stop(), 0)
        report = try doctor(socket: daemon.socket, home: daemon.directory.path, bus: bus.address)
        keyStore = try report.one("keystore")
        XCTAssertEqual(keyStore.status, "error", report.raw)
        XCTAssertTrue(keyStore.message.contains("locked") && keyStore.message.contains("cannot start"), keyStore.message)
        XCTAssertEqual(report.exitStatus, 1)
        let start = try daemon.launch()
        start.waitUntilExit()
        XCTAssertEqual(start.terminationStatus, 75, "doctor was right: \(daemon.log)")
    }

    /// key_store = "secret-service" and no Secret Service on the bus (none can be activated): brokerd cannot start,
    /// and doctor, without it, says why.
    func testAnAbsentSecretServiceIsAnErrorWhenTheConfigurationNeedsIt() throws {
        let services = TemporaryDirectory("brokerd-no-services")
        let bus = try PrivateSessionBus { PrivateSessionBus.sessionConfiguration(socketPath: $0, serviceDirectory: services.path) }
        let home = TemporaryDirectory("brokerd-doctor")
        try FileManager.default.createDirectory(atPath: home.path + "/config/brokerd", withIntermediateDirectories: true)
        try "key_store = \"secret-service\"\n".write(toFile: home.path + "/config/brokerd/config.toml", atomically: true, encoding: .utf8)
        let report = try doctor(socket: home.path + "/run/brokerd/brokerd.sock", home: home.path, bus: bus.address)
        let keyStore = try report.one("keystore")
        XCTAssertEqual(keyStore.status, "error", report.raw)
        XCTAssertTrue(keyStore.message.contains("no Secret Service on the session bus"), keyStore.message)
        XCTAssertTrue(try report.one("dbus.name").message.contains("nobody owns"), report.raw)
    }

    // MARK: Network

    /// brokerd signs in against the test IdP, the IdP goes away, a refresh fails: doctor names the host, what brokerd
    /// ran into, and that it cannot be reached from here either.
    func testAnUnreachableIdentityProviderIsReportedWithItsHost() throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        idp.stop()
        let refresh = try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--force-refresh"])
        XCTAssertNotEqual(refresh.status, 0, "the IdP is down")

        let report = try doctor(socket: daemon.socket, home: daemon.directory.path)
        XCTAssertEqual(report.exitStatus, 1, report.raw)
        let host = try XCTUnwrap(URL(string: idp.http)).host! + ":" + String(try XCTUnwrap(URL(string: idp.http)?.port))
        let unreachable = try report.one("network.unreachable")
        XCTAssertEqual(unreachable.status, "error", report.raw)
        XCTAssertEqual(unreachable.subject, host)
        XCTAssertTrue(unreachable.message.contains("brokerd could not reach \(host)"), unreachable.message)
        XCTAssertTrue(unreachable.message.contains("from here too"), "the TCP probe fails as well: \(unreachable.message)")
        let discovery = try report.one("network.discovery")
        XCTAssertTrue(discovery.subject?.hasPrefix(idp.http) ?? false, "\(discovery)")
        XCTAssertTrue(discovery.message.contains("learned"), discovery.message)
    }

    /// The IdP's wall clock ten minutes ahead (Tests/clock/wallclock_step.c preloaded into it alone, as ClockStepTests
    /// does): its Date headers say so, and doctor tells the user that this machine's clock is behind.
    func testAClockMinutesOffTheIdentityProvidersIsAnError() throws {
        let directory = TemporaryDirectory("brokerd-doctor-clock")
        let library = directory.path + "/wallclock_step.so", stepFile = directory.path + "/step"
        let compiler = ["/usr/bin/cc", "/opt/swift/usr/bin/clang"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let compiler else { throw missing("no C compiler for Tests/clock/wallclock_step.c") }
        let built = try runCommand(compiler, ["-shared", "-fPIC", "-O2", "-o", library, TestIdP.root + "/Tests/clock/wallclock_step.c", "-ldl"])
        XCTAssertEqual(built.status, 0, built.stderr)
        try "600\n".write(toFile: stepFile, atomically: true, encoding: .utf8)
        let idp = try TestIdP(environment: ["LD_PRELOAD": library, "WALLCLOCK_STEP_FILE": stepFile])
        let daemon = try startBroker(idp)
        // Any answer of the IdP carries its Date: the device-code sign-in's first requests are enough.
        let login = try RunningCommand(Binaries.brokerctl, ["login", "mail", "--device-code", "--config", daemon.configPath,
                                                            "--socket", daemon.socket])
        defer {
            login.process.terminate()
            _ = login.finish()
        }
        var skew: Finding?
        waitFor("doctor reports the clock skew") {
            skew = try? doctor(socket: daemon.socket, home: daemon.directory.path).all("clock.skew").first { $0.status == "error" }
            return skew != nil
        }
        let finding = try XCTUnwrap(skew)
        XCTAssertTrue(finding.message.contains("behind"), finding.message)
        XCTAssertTrue(finding.message.contains("tokens will look expired or not yet valid"), finding.message)
        XCTAssertTrue(finding.fix?.contains("timedatectl set-ntp true") ?? false, "\(finding)")
        XCTAssertTrue(idp.http.contains(finding.subject ?? "-"), "\(finding)")
    }

    // MARK: Waiting for the user

    func testAPendingDeviceCodeSignInSaysWhereToEnterTheCode() throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let login = try RunningCommand(Binaries.brokerctl, ["login", "mail", "--device-code", "--config", daemon.configPath,
                                                            "--socket", daemon.socket])
        var pending: Finding?
        waitFor("doctor shows the waiting sign-in") {
            pending = try? doctor(socket: daemon.socket, home: daemon.directory.path).all("signIn.pending")
                .first { $0.status == "warning" }
            return pending != nil
        }
        let signIn = try XCTUnwrap(pending)
        XCTAssertTrue(signIn.message.contains("app brokerd-test-app-a waits for a sign-in"), signIn.message)
        XCTAssertTrue(signIn.fix?.contains("Open \(idp.http)") ?? false, "\(signIn)")
        XCTAssertTrue(signIn.fix?.contains("enter the code") ?? false, "\(signIn)")
        let report = try doctor(socket: daemon.socket, home: daemon.directory.path)
        XCTAssertEqual(report.exitStatus, 0, "a waiting sign-in is a warning: \(report.raw)")
        XCTAssertEqual(try doctor(socket: daemon.socket, home: daemon.directory.path, extra: ["--strict"]).exitStatus, 1)
        login.process.terminate()
        _ = login.finish()
    }

    // MARK: version

    func testVersionAnswersWithoutBrokerd() throws {
        let home = TemporaryDirectory("brokerd-doctor")
        let socket = home.path + "/nothing.sock"
        let text = try runCommand(Binaries.brokerctl, ["version", "--socket", socket], environment: environment(home: home.path))
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.stdout.hasPrefix("brokerctl \(brokerVersion) (protocol "), text.stdout)
        XCTAssertTrue(text.stdout.contains("brokerd: not running at \(socket)"), text.stdout)

        let json = try runCommand(Binaries.brokerctl, ["version", "--json", "--socket", socket], environment: environment(home: home.path))
        XCTAssertEqual(json.status, 0, json.stderr)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        XCTAssertEqual((object["brokerctl"] as? [String: Any])?["version"] as? String, brokerVersion)
        XCTAssertNil(object["brokerd"])
        XCTAssertNotNil(object["brokerdError"])

        let daemon = try Daemon()
        try daemon.start()
        let running = try daemon.ctl(["version", "--json"])
        XCTAssertEqual(running.status, 0, running.stderr)
        let both = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(running.stdout.utf8)) as? [String: Any])
        XCTAssertEqual((both["brokerd"] as? [String: Any])?["version"] as? String, brokerVersion)
        XCTAssertNotNil((both["brokerd"] as? [String: Any])?["methods"])
    }
}
