import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// The account API end to end: the real brokerd, driven through its socket (BrokerClient) and through brokerctl.
final class AccountLifecycleTests: XCTestCase {
    /// One story, in order, over 80 lines: each step's state is the next step's start (an import, the lists, a
    /// removal for one app, a sign-out, a restart that must keep all of it), so splitting it would repeat the steps.
    func testImportListRemoveSignOutAndRestart() async throws {
        let daemon = try Daemon()
        try daemon.start()
        let connection = BrokerConnection(socketPath: daemon.socket)

        // Import (through the socket, as an app would).
        let imported = try await connection.call(
            .importCache, ImportCacheParams(data: CacheFixture.twoAppsTwoAccounts.json), as: ImportResult.self)
        XCTAssertEqual(imported.added, 3 + 3 + 3 + 2)
        XCTAssertEqual(imported.accounts, 2)

        // List through brokerctl, human and JSON.
        let table = try daemon.ctl(["accounts"])
        XCTAssertEqual(table.status, 0, table.stderr)
        XCTAssertTrue(table.stdout.contains("Alice@Contoso.example  \(CacheFixture.alice)"), table.stdout)
        XCTAssertTrue(table.stdout.contains("client-a: refresh token (family 1); 1 access token"), table.stdout)
        XCTAssertTrue(table.stdout.contains("client-b: refresh token; 1 access token"), table.stdout)
        let listed = try decode(AccountsResult.self, try daemon.ctl(["accounts", "--json"]).stdout)
        XCTAssertEqual(listed.accounts.map(\.username), ["Alice@Contoso.example", "bob@contoso.example"])

        // Username lookup is case-insensitive (the ADAL migration path).
        let found = try await connection.call(
            .getAccount, GetAccountParams(clientId: "client-b", username: "alice@CONTOSO.example"), as: AccountResult.self)
        XCTAssertEqual(found.account?.homeAccountId, CacheFixture.alice)

        // Per-app removal: A loses Alice (tokens and visibility), B keeps its tokens, the family RT stays.
        let removal = try daemon.ctl(["remove", "alice@contoso.example", "--client-id", "client-a", "--json"])
        XCTAssertEqual(removal.status, 0, removal.stderr)
        let removed = try decode(RemovalResult.self, removal.stdout)
        XCTAssertEqual(removed.removedAccessTokens, 1)
        XCTAssertEqual(removed.removedIdTokens, 1)
        XCTAssertEqual(removed.removedRefreshTokens, 0)
        XCTAssertEqual(removed.familyRefreshTokensKept, 1)

        let seenByA = try await connection.call(.getAccounts, GetAccountsParams(clientId: "client-a"), as: AccountsResult.self)
        XCTAssertEqual(seenByA.accounts.map(\.homeAccountId), [CacheFixture.bob])
        let aliceForA = try await connection.call(
            .getAccount, GetAccountParams(clientId: "client-a", homeAccountId: CacheFixture.alice), as: AccountResult.self)
        XCTAssertNil(aliceForA.account)
        let seenByB = try await connection.call(.getAccounts, GetAccountsParams(clientId: "client-b"), as: AccountsResult.self)
        let aliceForB = try XCTUnwrap(seenByB.accounts.first { $0.homeAccountId == CacheFixture.alice })
        let bTokens = try XCTUnwrap(aliceForB.apps.first { $0.clientId == "client-b" })
        XCTAssertTrue(bTokens.hasRefreshToken)
        XCTAssertEqual(bTokens.accessTokens.map(\.scopes), [["Mail.Read"]])
        XCTAssertEqual(aliceForB.hiddenFrom, ["client-a"])

        // Restart: everything above is still there.
        XCTAssertEqual(daemon.stop(), 0)
        try daemon.start()
        let afterRestart = try await connection.call(.getAccounts, GetAccountsParams(clientId: "client-a"), as: AccountsResult.self)
        XCTAssertEqual(afterRestart.accounts.map(\.homeAccountId), [CacheFixture.bob], "per-app removal survives a restart")
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.refreshTokens, 3)
        XCTAssertEqual(status.accessTokens, 2)
        XCTAssertEqual(status.accounts, 2)
        XCTAssertEqual(status.keyStore.kind, "file")
        XCTAssertEqual(status.problems, [])

        // Sign-out everywhere: nothing of Alice is left, Bob is untouched.
        let signout = try daemon.ctl(["signout", CacheFixture.alice])
        XCTAssertEqual(signout.status, 0, signout.stderr)
        XCTAssertTrue(signout.stdout.contains("Signed out \(CacheFixture.alice): 2 refresh, 1 access"), signout.stdout)
        let exported = try await connection.call(.exportCache, ExportCacheParams(), as: ExportResult.self)
        let exportedData = try XCTUnwrap(exported.data)
        XCTAssertFalse(exportedData.contains(CacheFixture.alice))
        XCTAssertTrue(exportedData.contains("fake-rt-bob-a"))
        let all = try await connection.call(.getAccounts, GetAccountsParams(), as: AccountsResult.self)
        XCTAssertEqual(all.accounts.map(\.homeAccountId), [CacheFixture.bob])

        XCTAssertEqual(daemon.stop(), 0)
        try daemon.start()
        let final = try await connection.call(.getAccounts, GetAccountsParams(), as: AccountsResult.self)
        XCTAssertEqual(final.accounts.map(\.homeAccountId), [CacheFixture.bob], "sign-out survives a restart")

        // Secrets never reach the log or the file on disk in clear.
        XCTAssertFalse(daemon.log.contains("fake-"), "a secret reached the log")
        for file in ["cache.db", "cache.db-wal"] where FileManager.default.fileExists(atPath: daemon.stateDir + "/" + file) {
            let onDisk = try Data(contentsOf: URL(fileURLWithPath: daemon.stateDir + "/" + file))
            XCTAssertNil(onDisk.range(of: Data("fake-rt-bob-a".utf8)), "a secret is in \(file) in clear")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: daemon.stateDir + "/cache.db"))
        XCTAssertTrue(daemon.log.contains("method=importCache"), "requests are logged")
        XCTAssertEqual(daemon.stop(), 0)
    }

    func testImportAndExportThroughFiles() throws {
        let daemon = try Daemon()
        try daemon.start()
        var fixture = CacheFixture.twoAppsTwoAccounts
        fixture.extraTopLevel = #""customized": {"keep": [1, 2.50, "\u00e9"]}"#
        let input = daemon.directory.path + "/msal_token_cache.json"
        // A BOM, as MSAL.NET writes it.
        try Data([0xEF, 0xBB, 0xBF] + Array(fixture.json.utf8)).write(to: URL(fileURLWithPath: input))

        let imported = try daemon.ctl(["import", input])
        XCTAssertEqual(imported.status, 0, imported.stderr)
        XCTAssertTrue(imported.stdout.contains("11 new"), imported.stdout)

        let output = daemon.directory.path + "/export.json"
        let exported = try daemon.ctl(["export", output])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let attributes = try FileManager.default.attributesOfItem(atPath: output)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let text = try String(contentsOfFile: output, encoding: .utf8)
        XCTAssertTrue(text.contains(#""customized": {"keep": [1, 2.50, "\u00e9"]}"#), "unknown sections kept byte-for-byte")
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        XCTAssertEqual((object["RefreshToken"] as? [String: Any])?.count, 3)

        // Re-importing the export changes nothing (same credentials, same keys).
        let again = try daemon.ctl(["import", output, "--json"])
        let result = try decode(ImportResult.self, again.stdout)
        XCTAssertEqual(result.added, 0)
        XCTAssertEqual(result.replaced, 11)

        // A broken document is refused with a clear message, and the daemon keeps its state.
        try "{\"AccessToken\": {".write(toFile: input, atomically: true, encoding: .utf8)
        let broken = try daemon.ctl(["import", input])
        XCTAssertEqual(broken.status, 1)
        XCTAssertTrue(broken.stderr.contains("the cache document cannot be read"), broken.stderr)
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.refreshTokens, 3)
    }

    func testBrokerctlReportsMissingDaemonWithExitCode3() throws {
        let directory = TemporaryDirectory()
        let result = try runCommand(Binaries.brokerctl, ["status", "--socket", directory.path + "/none.sock"])
        XCTAssertEqual(result.status, 3)
        XCTAssertTrue(result.stderr.contains("brokerd is not running at \(directory.path)/none.sock"), result.stderr)
        XCTAssertTrue(result.stderr.contains("hint:"), result.stderr)
        // token makes its calls without SwiftNIO (blockingCalls): the same report.
        let token = try runCommand(Binaries.brokerctl, ["token", "--client-id", "app", "--scope", "User.Read",
                                                        "--socket", directory.path + "/none.sock"])
        XCTAssertEqual(token.status, 3)
        XCTAssertTrue(token.stderr.contains("brokerd is not running at \(directory.path)/none.sock"), token.stderr)
    }

    /// Usage errors exit 64 (EX_USAGE, swift-argument-parser's), as `brokerctl --help` says: an unknown option, and
    /// a token command that names neither a profile nor a client id.
    func testBrokerctlUsageErrorsExit64AsItsHelpSays() throws {
        let help = try runCommand(Binaries.brokerctl, ["--help"])
        XCTAssertTrue(help.stdout.replacingOccurrences(of: "\n", with: " ").contains("64 usage error"), help.stdout)
        let unknown = try runCommand(Binaries.brokerctl, ["token", "--bogus"])
        XCTAssertEqual(unknown.status, 64, unknown.stderr)
        XCTAssertTrue(unknown.stderr.contains("Unknown option '--bogus'"), unknown.stderr)
        let incomplete = try runCommand(Binaries.brokerctl, ["token", "--scope", "User.Read", "--socket", "/nonexistent/s.sock"])
        XCTAssertEqual(incomplete.status, 64, incomplete.stderr)
        XCTAssertTrue(incomplete.stderr.contains("name a PROFILE or pass --client-id"), incomplete.stderr)
    }

    func testUnknownAccountAndAmbiguousUsernameAreClearErrors() throws {
        let daemon = try Daemon()
        try daemon.start()
        var fixture = CacheFixture.twoAppsTwoAccounts
        fixture.grants[2].username = "ALICE@contoso.example"  // Bob's entry now shares Alice's username
        _ = try daemon.ctl(["import", "-"], stdin: fixture.json)
        let unknown = try daemon.ctl(["signout", "carol@contoso.example"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertEqual(unknown.stderr, "brokerctl: no account matches carol@contoso.example\n")
        let ambiguous = try daemon.ctl(["remove", "alice@contoso.example", "--client-id", "client-a"])
        XCTAssertEqual(ambiguous.status, 1)
        XCTAssertTrue(ambiguous.stderr.contains("matches 2 accounts"), ambiguous.stderr)
        // Nothing was removed.
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.refreshTokens, 3)
    }

    func testHumanStatusShowsWhatAUserNeeds() throws {
        let daemon = try Daemon(config: "key_store = \"memory\"\n")
        try daemon.start()
        let status = try daemon.ctl(["status"])
        XCTAssertEqual(status.status, 0, status.stderr)
        for expected in ["socket", daemon.socket, "cache      in memory only", "key store  memory (nothing on disk)",
                         "accounts   0", "config     \(daemon.configPath)"] {
            XCTAssertTrue(status.stdout.contains(expected), "missing '\(expected)' in:\n\(status.stdout)")
        }
        _ = try daemon.ctl(["import", "-"], stdin: CacheFixture.twoAppsTwoAccounts.json)
        XCTAssertEqual(daemon.stop(), 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: daemon.stateDir + "/cache.db"), "memory mode writes nothing")
        XCTAssertFalse(FileManager.default.fileExists(atPath: daemon.stateDir + "/cache.key"))
    }
}

func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
    try JSONDecoder().decode(type, from: Data(text.utf8))
}
