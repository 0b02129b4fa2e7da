import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// kill -9 in the middle of repeated cache writes, many times: every restart loads the last committed state.
final class CrashSafetyTests: XCTestCase {
    /// Each round: start, import generation after generation (each acknowledged only once it is on disk),
    /// SIGKILL at a random moment, restart, and check that the cache loads, nothing was moved aside, and the
    /// newest generation on disk is at least the last acknowledged one.
    func testKillNineDuringWritesNeverLosesCommittedState() async throws {
        let rounds = Int(ProcessInfo.processInfo.environment["BROKERD_CRASH_ROUNDS"] ?? "") ?? 100
        let daemon = try Daemon(config: "write_delay_ms = 0\n")
        var generation = 0
        var lastAcknowledged = 0
        var random = SystemRandomNumberGenerator()

        for round in 1...rounds {
            try daemon.start()
            let connection = BrokerConnection(socketPath: daemon.socket)

            // Loaded state after the previous kill: intact and at least what was acknowledged.
            let status = try await connection.call(.getStatus, as: StatusResult.self)
            XCTAssertEqual(status.problems, [], "round \(round): the cache file was unusable after kill -9")
            let newest = try await newestGeneration(connection)
            XCTAssertGreaterThanOrEqual(newest, lastAcknowledged, "round \(round): an acknowledged write was lost")
            XCTAssertLessThanOrEqual(newest, generation, "round \(round): a generation that was never sent")
            if round == rounds { break }

            let pid = daemon.pid
            let killAfter = UInt64.random(in: 5_000...60_000, using: &random)
            let killer = Thread {
                usleep(useconds_t(killAfter))
                kill(pid, SIGKILL)
            }
            killer.start()
            while true {
                generation += 1
                do {
                    _ = try await connection.call(.importCache, ImportCacheParams(data: Self.document(generation)),
                                                  as: ImportResult.self)
                    lastAcknowledged = generation
                } catch {
                    break  // the daemon died mid-request
                }
            }
            daemon.stop(SIGKILL)
            await connection.disconnect()
        }
        XCTAssertGreaterThan(lastAcknowledged, rounds, "the writer made progress between kills")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: daemon.stateDir)
            .filter { $0.contains(".tmp-") || $0.contains("unreadable") }
        // A temporary file of a write that was killed may remain; it is never read and never the cache.
        XCTAssertFalse(leftovers.contains { $0.contains("unreadable") }, "\(leftovers)")
        daemon.stop()
    }

    /// One account whose access token's scope names the generation.
    static func document(_ generation: Int) -> String {
        let hid = "00000000-0000-0000-0000-000000000001.00000000-0000-0000-0000-0000000000aa"
        return """
            {"AccessToken": {"g": {"credential_type": "AccessToken", "secret": "fake-at", "home_account_id": "\(hid)",
              "environment": "login.microsoftonline.com", "client_id": "crash-client", "realm": "aa",
              "target": "generation.\(generation)", "cached_at": "\(1_700_000_000 + generation)",
              "expires_on": "4000000000", "extended_expires_on": "4000000000"}},
             "Account": {"a": {"home_account_id": "\(hid)", "environment": "login.microsoftonline.com", "realm": "aa",
              "username": "crash@example.com", "authority_type": "MSSTS"}}}
            """
    }

    private func newestGeneration(_ connection: BrokerConnection) async throws -> Int {
        let accounts = try await connection.call(.getAccounts, GetAccountsParams(), as: AccountsResult.self)
        let scopes = accounts.accounts.flatMap(\.apps).flatMap(\.accessTokens).flatMap(\.scopes)
        return scopes.compactMap { Int($0.dropFirst("generation.".count)) }.max() ?? 0
    }
}

/// A daemon that is stopped (SIGSTOP, a debugger, a frozen cgroup) and continued goes on serving, with its cache,
/// the connections it had and new ones.
final class StopContinueTests: XCTestCase {
    func testSIGSTOPThenSIGCONTKeepsServing() async throws {
        let daemon = try Daemon()
        try daemon.start()
        let connection = BrokerConnection(socketPath: daemon.socket)
        _ = try await connection.call(.importCache, ImportCacheParams(data: CrashSafetyTests.document(7)), as: ImportResult.self)

        XCTAssertEqual(kill(daemon.pid, SIGSTOP), 0)
        // A request sent while it is stopped waits in the socket (connect and send complete without brokerd: the
        // kernel queues both) and is answered after SIGCONT.
        let waiting = try RawClient(daemon.socket)
        try waiting.send(#"{"jsonrpc":"2.0","id":1,"method":"getAccounts","params":{}}"# + "\n")
        XCTAssertEqual(kill(daemon.pid, SIGCONT), 0)

        let answered = try waiting.readMessage()
        XCTAssertEqual((answered["result"] as? [String: Any])?["accounts"].flatMap { $0 as? [Any] }?.count, 1, "\(answered)")
        let again = try await connection.call(.getAccounts, GetAccountsParams(), as: AccountsResult.self)
        XCTAssertEqual(again.accounts.first?.username, "crash@example.com", "the connection of before the stop still works")
        await connection.disconnect()
        XCTAssertEqual(daemon.stop(), 0, "and it stops cleanly: \(daemon.log)")
    }
}
