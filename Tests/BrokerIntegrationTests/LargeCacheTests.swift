import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// A cache larger than one message: `brokerctl import FILE` and `export FILE` go through files brokerd reads and
/// writes itself, with the caller's file checks; cache hits stay hits at that size; the cache survives a restart.
final class LargeCacheTests: XCTestCase {
    /// 1,500 accounts with two apps each and 700-byte access tokens: a document of several MiB.
    static func largeFixture() -> CacheFixture {
        let filler = String(repeating: "x", count: 700)
        var grants: [CacheFixture.Grant] = []
        for n in 0..<1_500 {
            let hid = String(format: "00000000-0000-0000-0000-%012d.72f988bf-0000-0000-0000-000000000001", n)
            for client in ["client-a", "client-b"] {
                grants.append(CacheFixture.Grant(homeAccountId: hid, username: "user\(n)@contoso.example", clientId: client,
                                                 scopes: "User.Read", secretTag: "\(n)-\(client)-\(filler)"))
            }
        }
        return CacheFixture(grants: grants)
    }

    func testImportAndExportBeyondTheMessageLimit() async throws {
        // No background refresh: the hit below makes its token a use, and the renewal of it against the fixture's
        // unreachable Microsoft host is a refresh in flight that the last stop waits out (3 s of this test).
        let daemon = try Daemon(config: "background_refresh = false\n")
        try daemon.start()
        let input = daemon.directory.path + "/large.json"
        let document = Self.largeFixture().json
        XCTAssertGreaterThan(document.utf8.count, 3 << 20, "the document must not fit in one message")
        try document.write(toFile: input, atomically: true, encoding: .utf8)

        let imported = try daemon.ctl(["import", input])
        XCTAssertEqual(imported.status, 0, imported.stderr)
        XCTAssertTrue(imported.stdout.contains("10500 new"), imported.stdout)  // 3,000 each of AT, RT, IdToken; 1,500 accounts
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.accounts, 1_500)
        XCTAssertEqual(status.accessTokens, 3_000)

        // A hit in the big cache; its account is that one account.
        let connection = BrokerConnection(socketPath: daemon.socket)
        let hid = String(format: "00000000-0000-0000-0000-%012d.72f988bf-0000-0000-0000-000000000001", 1234)
        let hit = try await connection.call(.acquireTokenSilently, AcquireTokenSilentlyParams(
            clientId: "client-b", authority: "https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001",
            scopes: ["User.Read"], account: AccountReference(homeAccountId: hid)), as: TokenResult.self)
        XCTAssertEqual(hit.source, "cache")
        XCTAssertTrue(hit.accessToken.hasPrefix("fake-at-1234-client-b-"))
        XCTAssertEqual(hit.account.homeAccountId, hid)
        XCTAssertEqual(hit.account.username, "user1234@contoso.example")

        // Export to a file; it is the whole cache, 0600, and a restart loads the same.
        let output = daemon.directory.path + "/out/export.json"
        try FileManager.default.createDirectory(atPath: daemon.directory.path + "/out", withIntermediateDirectories: true)
        let exported = try daemon.ctl(["export", output])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let attributes = try FileManager.default.attributesOfItem(atPath: output)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let root = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: output))) as! [String: Any]
        XCTAssertEqual((root["AccessToken"] as? [String: Any])?.count, 3_000)
        XCTAssertEqual((root["RefreshToken"] as? [String: Any])?.count, 3_000)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: daemon.directory.path + "/out"), ["export.json"],
                       "no temporary file is left")

        XCTAssertEqual(daemon.stop(), 0)
        try daemon.start()
        // 10,500 rows and more: loaded in two parts at once (CacheStore.twoPartLoadRows).
        let restarted = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(restarted.accounts, 1_500)
        XCTAssertEqual(restarted.accessTokens, 3_000)
        XCTAssertEqual(restarted.refreshTokens, 3_000)
        XCTAssertEqual(restarted.problems, [])
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// brokerd reads and writes only files of its own user, by absolute path, never through a symbolic link.
    func testFilesOfOthersAreRefused() async throws {
        let daemon = try Daemon()
        try daemon.start()
        let connection = BrokerConnection(socketPath: daemon.socket)
        let dir = daemon.directory.path
        let document = dir + "/cache.json"
        try CacheFixture.twoAppsTwoAccounts.json.write(toFile: document, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: dir + "/link.json", withDestinationPath: document)

        func refusal(_ params: ImportCacheParams) async throws -> RPCError? {
            do {
                _ = try await connection.call(.importCache, params, as: ImportResult.self)
                return nil
            } catch let BrokerClientError.rpc(error) { return error }
        }
        for params in [ImportCacheParams(path: "cache.json"), ImportCacheParams(path: dir + "/missing.json"),
                       ImportCacheParams(path: dir + "/link.json"), ImportCacheParams(path: dir)] {
            let error = try await refusal(params)
            XCTAssertEqual(error?.code, RPCErrorCode.invalidParams, "\(params.path ?? "")")
            XCTAssertEqual(error?.data?.objectValue?["reason"]?.stringValue, "fileRefused", "\(params.path ?? "")")
        }
        let both = try await refusal(ImportCacheParams(data: "{}", path: document))
        XCTAssertEqual(both?.code, RPCErrorCode.invalidParams)
        let neither = try await refusal(ImportCacheParams())
        XCTAssertEqual(neither?.code, RPCErrorCode.invalidParams)

        if getuid() == 0 {  // another user's file (only root can make one here)
            XCTAssertEqual(chown(document, 65534, 65534), 0)
            let error = try await refusal(ImportCacheParams(path: document))
            XCTAssertEqual(error?.data?.objectValue?["reason"]?.stringValue, "fileRefused")
            XCTAssertTrue(error?.message.contains("another user") == true, error?.message ?? "")
            XCTAssertEqual(chown(document, 0, 0), 0)
        }
        _ = try await connection.call(.importCache, ImportCacheParams(path: document), as: ImportResult.self)

        // Export: not through a link, not over another kind of file.
        for target in [dir + "/link.json", dir, "relative.json"] {
            do {
                _ = try await connection.call(.exportCache, ExportCacheParams(path: target), as: ExportResult.self)
                XCTFail("exported to \(target)")
            } catch let BrokerClientError.rpc(error) {
                XCTAssertEqual(error.data?.objectValue?["reason"]?.stringValue, "fileRefused", target)
            }
        }
        XCTAssertEqual(daemon.stop(), 0)
    }
}
