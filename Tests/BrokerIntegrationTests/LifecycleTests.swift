import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// Starting, stopping and socket activation of the real brokerd binary.
final class LifecycleTests: XCTestCase {
    func testSocketActivationHandsTheSocketOver() throws {
        let activator = "/usr/bin/systemd-socket-activate"
        guard FileManager.default.isExecutableFile(atPath: activator) else {
            throw missing("systemd-socket-activate (package systemd) is not installed")
        }
        let daemon = try Daemon()
        try FileManager.default.createDirectory(atPath: daemon.directory.path + "/run", withIntermediateDirectories: true)
        // systemd-socket-activate listens, and starts brokerd with the socket as fd 3 on the first connection.
        let process = try daemon.launch(
            arguments: ["-l", daemon.socket, Binaries.brokerd, "--state-dir", daemon.stateDir, "--config", daemon.configPath],
            executable: activator)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
        var listening = false
        for _ in 0..<200 where !listening {
            listening = FileManager.default.fileExists(atPath: daemon.socket)
            if !listening { usleep(10_000) }
        }
        XCTAssertTrue(listening)

        let status = try daemon.ctl(["status", "--json"])
        XCTAssertEqual(status.status, 0, status.stderr + daemon.log)
        let decoded = try decode(StatusResult.self, status.stdout)
        XCTAssertTrue(decoded.socketActivated)
        XCTAssertEqual(decoded.socket, daemon.socket)
        XCTAssertEqual(decoded.pid, process.processIdentifier, "systemd-socket-activate execs brokerd in place")
        XCTAssertEqual(try daemon.ctl(["accounts"]).status, 0)

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertTrue(daemon.log.contains("socket_activated=true"), daemon.log)
    }

    func testSecondInstanceIsRefusedAndStaleSocketIsReplaced() throws {
        let daemon = try Daemon()
        try daemon.start()
        let second = try daemon.launch()
        second.waitUntilExit()
        XCTAssertNotEqual(second.terminationStatus, 0)
        XCTAssertTrue(daemon.log.contains("another brokerd is already serving \(daemon.socket)"), daemon.log)
        XCTAssertNotNil(try RawClient(daemon.socket).request("getStatus").result, "the first one still serves")

        // kill -9 leaves the socket file behind; the next start replaces it.
        daemon.stop(SIGKILL)
        XCTAssertTrue(FileManager.default.fileExists(atPath: daemon.socket))
        try daemon.start()
        XCTAssertNotNil(try RawClient(daemon.socket).request("getStatus").result)

        // Directory 0700, socket 0600.
        var info = stat()
        stat(daemon.directory.path + "/run", &info)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        stat(daemon.socket, &info)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)

        // SIGTERM: exit 0 and the socket file is gone.
        XCTAssertEqual(daemon.stop(), 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: daemon.socket))
    }

    func testRefusesToReplaceSomethingThatIsNotASocket() throws {
        let daemon = try Daemon()
        try FileManager.default.createDirectory(atPath: daemon.directory.path + "/run", withIntermediateDirectories: true)
        try "precious".write(toFile: daemon.socket, atomically: true, encoding: .utf8)
        let process = try daemon.launch()
        process.waitUntilExit()
        XCTAssertNotEqual(process.terminationStatus, 0)
        XCTAssertTrue(daemon.log.contains("is not a socket; refusing to replace it"), daemon.log)
        XCTAssertEqual(try String(contentsOfFile: daemon.socket, encoding: .utf8), "precious")
    }

    func testBadConfigurationIsAClearStartupError() throws {
        let daemon = try Daemon(config: "max_connections = \"lots\"\n")
        let process = try daemon.launch()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 1)
        XCTAssertTrue(daemon.log.contains("configuration error: \(daemon.configPath): line 1: 'max_connections' must be an integer"),
                      daemon.log)
    }

    func testSigtermLetsInFlightRequestsFinishAndFlushesTheCache() async throws {
        // A long coalescing window: the import below is acknowledged only after its write, and SIGTERM must not
        // lose the writes that are still pending for the requests in flight.
        let daemon = try Daemon(config: "write_delay_ms = 400\n")
        try daemon.start()
        let connection = BrokerConnection(socketPath: daemon.socket)
        let pending = Task {
            try await connection.call(.importCache, ImportCacheParams(data: CacheFixture.twoAppsTwoAccounts.json),
                                      as: ImportResult.self)
        }
        // The import is applied (the status counts its accounts) and waits for its write.
        waitFor("the import applied") {
            ((try? RawClient(daemon.socket).request("getStatus").result)?["accounts"] as? Int) == 2
        }
        kill(daemon.pid, SIGTERM)
        let result = try await pending.value
        XCTAssertEqual(result.accounts, 2, "the in-flight request was answered")
        XCTAssertEqual(daemon.stop(0), 0)
        try daemon.start()
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.refreshTokens, 3)
        XCTAssertEqual(daemon.stop(), 0)
    }

    func testACacheOfAnotherKeyWaitsForItAndIsReported() throws {
        let daemon = try Daemon()
        try daemon.start()
        _ = try daemon.ctl(["import", "-"], stdin: CacheFixture.twoAppsTwoAccounts.json)
        XCTAssertEqual(daemon.stop(), 0)
        // Another key: the database's key check no longer opens.
        let keyPath = daemon.stateDir + "/cache.key"
        try Data(repeating: 0x5A, count: 32).write(to: URL(fileURLWithPath: keyPath))
        XCTAssertEqual(chmod(keyPath, 0o600), 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: daemon.stateDir + "/cache.db"))

        try daemon.start()
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.accounts, 0)
        XCTAssertEqual(status.problems.count, 1)
        XCTAssertTrue(status.problems[0].contains("cannot be opened with the key") && status.problems[0].contains("waiting"),
                      status.problems[0])
        XCTAssertEqual(status.waitingCaches, [daemon.stateDir + "/cache.db"])
        XCTAssertNotEqual(status.cachePath, daemon.stateDir + "/cache.db")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: daemon.stateDir + "/cache.db")), before, "kept as it was")
        let human = try daemon.ctl(["status"])
        XCTAssertTrue(human.stdout.contains("PROBLEM"), human.stdout)
        XCTAssertEqual(daemon.stop(), 0)
    }
}
