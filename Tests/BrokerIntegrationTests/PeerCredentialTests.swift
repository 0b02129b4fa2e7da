import Foundation
import XCTest

/// SO_PEERCRED: a client of another user is refused before anything it sends is read; root only when allowed.
/// These need root (to run a process as `nobody`); elsewhere they are skipped with the reason printed.
final class PeerCredentialTests: XCTestCase {
    static let nobody: UInt32 = 65534

    private func requireRoot() throws {
        guard getuid() == 0 else {
            throw missing("needs root to run a client or the daemon as uid \(Self.nobody) (setpriv); running as uid \(getuid())")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { throw missing("setpriv is not installed") }
    }

    private func asNobody(_ command: [String]) -> [String] {
        ["/usr/bin/setpriv", "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups"] + command
    }

    func testConnectionFromAnotherUIDIsRefused() throws {
        try requireRoot()
        let daemon = try Daemon()
        try daemon.start()
        // Open the file-system permissions up, so that only the peer check stands in the way.
        for path in [daemon.directory.path, daemon.directory.path + "/run"] { chmod(path, 0o755) }
        chmod(daemon.socket, 0o666)

        let command = asNobody([Binaries.brokerctl, "status", "--socket", daemon.socket])
        let result = try runCommand(command[0], Array(command.dropFirst()))
        XCTAssertEqual(result.status, 1, result.stdout + result.stderr)
        XCTAssertTrue(result.stderr.contains("permission denied: brokerd serves uid 0 only; this connection is from uid 65534"),
                      result.stderr)
        // The refusal reaches the client and the log on separate paths: wait for the line rather than race it.
        let deadline = Date().addingTimeInterval(10)
        while !daemon.log.contains("connection refused: peer runs as another user"), Date() < deadline { usleep(50_000) }
        XCTAssertTrue(daemon.log.contains("connection refused: peer runs as another user"), daemon.log)
        XCTAssertTrue(daemon.log.contains("client_uid=65534"), daemon.log)
        XCTAssertFalse(daemon.log.contains("method=getStatus"), "the refused client's request must never be read or served")

        // The owner is still served.
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0)
        XCTAssertEqual(daemon.stop(), 0)
    }

    func testRootIsRefusedUnlessTheConfigAllowsItAndReloadAppliesIt() throws {
        try requireRoot()
        let directory = TemporaryDirectory()
        chown(directory.path, Self.nobody, Self.nobody)
        let daemon = try Daemon(config: "allow_root = false\n", directory: directory)
        chown(daemon.configPath, Self.nobody, Self.nobody)
        let process = try daemon.launch(prefix: asNobody([]))
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        try daemon.waitUntilServing()

        let refused = try RawClient(daemon.socket).request("getStatus")
        XCTAssertEqual(refused.errorCode, -32001, "\(refused)")
        let statusRefused = try daemon.ctl(["status"])
        XCTAssertEqual(statusRefused.status, 1)
        // token makes its calls without SwiftNIO (blockingCalls), and reports the same refusal.
        let tokenRefused = try daemon.ctl(["token", "--client-id", "app", "--scope", "User.Read"])
        XCTAssertEqual(tokenRefused.status, 1)
        XCTAssertFalse(statusRefused.stderr.isEmpty)
        XCTAssertEqual(tokenRefused.stderr, statusRefused.stderr)

        // The process is not dumpable: the kernel makes its /proc entries root's although it runs as nobody.
        var info = stat()
        XCTAssertEqual(stat("/proc/\(process.processIdentifier)/status", &info), 0)
        XCTAssertEqual(info.st_uid, 0, "brokerd must be non-dumpable (prctl PR_SET_DUMPABLE 0)")
        let owner = try String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)
        XCTAssertTrue(owner.contains("Uid:\t65534"), "the daemon runs as nobody")

        // SIGHUP reloads the config: now root is allowed.
        try "allow_root = true\n".write(toFile: daemon.configPath, atomically: false, encoding: .utf8)
        kill(process.processIdentifier, SIGHUP)
        var allowed = false
        for _ in 0..<100 where !allowed {
            allowed = (try? RawClient(daemon.socket).request("getStatus").result) != nil
            if !allowed { usleep(30_000) }
        }
        XCTAssertTrue(allowed, daemon.log)
        XCTAssertTrue(daemon.log.contains("configuration reloaded"), daemon.log)

        // A broken config on reload keeps the running one.
        try "allow_root = maybe\n".write(toFile: daemon.configPath, atomically: false, encoding: .utf8)
        kill(process.processIdentifier, SIGHUP)
        waitFor("the broken configuration refused") { daemon.log.contains("configuration not reloaded") }
        XCTAssertNotNil(try RawClient(daemon.socket).request("getStatus").result)

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
    }
}

/// The other direction: brokerd refuses a socket directory another user controls, and clients refuse a socket
/// that another user serves.
final class SocketOwnershipTests: XCTestCase {
    static let nobody: UInt32 = 65534

    private func requireRoot() throws {
        guard getuid() == 0 else { throw missing("needs root to act as other users (setpriv); running as uid \(getuid())") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { throw missing("setpriv is not installed") }
    }

    func testSocketDirectoryOfAnotherUserIsRefused() throws {
        try requireRoot()
        let daemon = try Daemon()
        let runDirectory = daemon.directory.path + "/run"
        try FileManager.default.createDirectory(atPath: runDirectory, withIntermediateDirectories: true)
        chown(runDirectory, Self.nobody, Self.nobody)
        let process = try daemon.launch()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 1)
        XCTAssertTrue(daemon.log.contains("belongs to another user or is writable by others"), daemon.log)
    }

    func testClientRefusesASocketServedByAnotherUser() throws {
        try requireRoot()
        let directory = TemporaryDirectory()
        chmod(directory.path, 0o755)
        chown(directory.path, Self.nobody, Self.nobody)
        let daemon = try Daemon(directory: directory)
        chown(daemon.configPath, Self.nobody, Self.nobody)
        let process = try daemon.launch(prefix: ["/usr/bin/setpriv", "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups"])
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        try daemon.waitUntilServing()
        // Let a third user reach the socket on the file system: only the credential checks stand in the way.
        chmod(daemon.directory.path + "/run", 0o755)
        chmod(daemon.socket, 0o666)
        let result = try runCommand("/usr/bin/setpriv", ["--reuid=65533", "--regid=65533", "--clear-groups",
                                                          Binaries.brokerctl, "status", "--socket", daemon.socket])
        XCTAssertEqual(result.status, 1, result.stdout + result.stderr)
        XCTAssertTrue(result.stderr.contains("is served by uid 65534, not by this user"), result.stderr)
    }
}
