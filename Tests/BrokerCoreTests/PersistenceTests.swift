import BrokerCache
import BrokerCore
import BrokerJSON
import Foundation
import Logging
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The encrypted cache file, its key, files that cannot be used, and the broker's group commit.
final class PersistenceTests: XCTestCase {
    private func sampleDocument(secret: String = "fake-plaintext-secret-1") throws -> CacheDocument {
        var cache = TokenCache()
        cache.add(.accessToken, accessToken(hid: "uid.utid", client: "client-a", realm: "tenant", target: "User.Read",
                                            secret: secret))
        cache.add(.account, accountEntry(hid: "uid.utid", realm: "tenant", username: "user@contoso.example"))
        cache.setOtherSection("customized", json: #""whatever""#)
        return try CacheDocument.parse(cache.persisted())
    }

    private func files(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    func testSaveLoadRoundTripWithNewKeyFile() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyPath = "\(dir)/keys/cache.key", cachePath = "\(dir)/state/cache.bin"
        let store = CacheStore(path: cachePath, keyStore: .file(path: keyPath))
        let first = try await store.load()
        XCTAssertEqual(first.document.entityCount, 0)
        XCTAssertNil(first.problem)
        XCTAssertEqual(fileMode(keyPath), 0o600)
        XCTAssertEqual(try AtomicFile.read(keyPath)?.count, 32)

        let document = try sampleDocument()
        try await store.save(document.serialized(indent: nil))
        let onDisk = try XCTUnwrap(try AtomicFile.read(cachePath))
        XCTAssertEqual(Array(onDisk.prefix(8)), CacheStore.header)
        XCTAssertFalse(contains(onDisk, "fake-plaintext-secret-1"))
        XCTAssertFalse(contains(onDisk, "user@contoso.example"))
        XCTAssertFalse(contains(onDisk, "AccessToken"))
        XCTAssertEqual(fileMode(cachePath), 0o600)
        XCTAssertEqual(try files(in: "\(dir)/state"), ["cache.bin"], "no temporary file is left behind")

        // A new store (a restart) with the same key file reads it back.
        let reopened = CacheStore(path: cachePath, keyStore: .file(path: keyPath))
        let loaded = try await reopened.load()
        XCTAssertNil(loaded.problem)
        XCTAssertEqual(loaded.document, document)
        XCTAssertEqual(TokenCache(document: loaded.document).secrets(.accessToken, CacheQuery(clientId: "client-a")),
                       ["fake-plaintext-secret-1"])
        XCTAssertEqual(loaded.document.otherSections.map(\.json), [#""whatever""#])
    }

    private func assertMovedAside(_ dir: String, store: CacheStore, file: StaticString = #filePath,
                                  line: UInt = #line) async throws {
        let loaded = try await store.load()
        XCTAssertEqual(loaded.document.entityCount, 0, file: file, line: line)
        XCTAssertEqual(loaded.document.otherSections.count, 0, file: file, line: line)
        let problem = try XCTUnwrap(loaded.problem, "a problem is reported", file: file, line: line)
        let names = try files(in: dir)
        XCTAssertFalse(names.contains("cache.bin"), "the unusable file is not left in place: \(names)", file: file, line: line)
        let aside = names.filter { $0.hasPrefix("cache.bin.unreadable-") }
        XCTAssertEqual(aside.count, 1, "\(names)", file: file, line: line)
        XCTAssertTrue(problem.contains(aside.first ?? "?"), "the problem names the new file: \(problem)", file: file, line: line)
    }

    func testTamperedFileIsMovedAside() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyStore = KeyStore.file(path: "\(dir)/cache.key"), cachePath = "\(dir)/cache.bin"
        let store = CacheStore(path: cachePath, keyStore: keyStore)
        _ = try await store.load()
        try await store.save(try sampleDocument().serialized())
        var bytes = try XCTUnwrap(try AtomicFile.read(cachePath))
        bytes[bytes.count / 2] ^= 0x01
        try AtomicFile.replace(cachePath, with: bytes)
        let original = bytes

        try await assertMovedAside(dir, store: CacheStore(path: cachePath, keyStore: keyStore))
        let aside = try XCTUnwrap(try files(in: dir).first { $0.hasPrefix("cache.bin.unreadable-") })
        XCTAssertEqual(try AtomicFile.read("\(dir)/\(aside)"), original, "moved, never rewritten")
    }

    func testTamperedHeaderIsMovedAside() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyStore = KeyStore.file(path: "\(dir)/cache.key"), cachePath = "\(dir)/cache.bin"
        let store = CacheStore(path: cachePath, keyStore: keyStore)
        _ = try await store.load()
        try await store.save(try sampleDocument().serialized())
        var bytes = try XCTUnwrap(try AtomicFile.read(cachePath))
        bytes[7] = 0x02  // format version; it is authenticated
        try AtomicFile.replace(cachePath, with: bytes)
        try await assertMovedAside(dir, store: CacheStore(path: cachePath, keyStore: keyStore))
    }

    func testGarbageFileIsMovedAside() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyStore = KeyStore.file(path: "\(dir)/cache.key")
        _ = try keyStore.loadKey()  // an existing key, so only the cache file is at fault
        try AtomicFile.replace("\(dir)/cache.bin", with: Array(#"{"AccessToken": {}}"#.utf8))
        try await assertMovedAside(dir, store: CacheStore(path: "\(dir)/cache.bin", keyStore: keyStore))
    }

    func testCacheFileWithoutItsKeyIsMovedAside() async throws {
        let dir = try makeTemporaryDirectory(self)
        try AtomicFile.replace("\(dir)/cache.bin", with: CacheStore.header + Array(repeating: 7, count: 64))
        let store = CacheStore(path: "\(dir)/cache.bin", keyStore: .file(path: "\(dir)/cache.key"))
        try await assertMovedAside(dir, store: store)
        XCTAssertEqual(fileMode("\(dir)/cache.key"), 0o600)
    }

    func testKeyFileReadableByOthersIsRefused() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyPath = "\(dir)/cache.key"
        try AtomicFile.replace(keyPath, with: Array(repeating: 1, count: 32), mode: 0o600)
        XCTAssertEqual(chmod(keyPath, 0o644), 0)
        let keyStore = KeyStore.file(path: keyPath)
        XCTAssertThrowsError(try keyStore.loadKey()) { error in
            guard case .insecurePermissions(let path, let mode)? = error as? KeyStore.Failure else {
                return XCTFail("unexpected \(error)")
            }
            XCTAssertEqual(path, keyPath)
            XCTAssertEqual(mode & 0o777, 0o644)
        }
        do {
            _ = try await CacheStore(path: "\(dir)/cache.bin", keyStore: keyStore).load()
            XCTFail("load must refuse the key")
        } catch {
            XCTAssertNotNil(error as? KeyStore.Failure)
        }
        XCTAssertEqual(try files(in: dir), ["cache.key"])
    }

    func testKeyFileOfWrongSizeIsRefused() throws {
        let dir = try makeTemporaryDirectory(self)
        let keyPath = "\(dir)/cache.key"
        try AtomicFile.replace(keyPath, with: Array(repeating: 1, count: 16), mode: 0o600)
        XCTAssertThrowsError(try KeyStore.file(path: keyPath).loadKey()) { error in
            guard case .wrongSize(_, let bytes)? = error as? KeyStore.Failure else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(bytes, 16)
        }
    }

    func testMemoryKeyStoreWritesNothing() async throws {
        let dir = try makeTemporaryDirectory(self)
        let store = CacheStore(path: "\(dir)/cache.bin", keyStore: .memory)
        let persists = await store.persists
        XCTAssertFalse(persists)
        let loaded = try await store.load()
        XCTAssertNil(loaded.problem)
        XCTAssertEqual(loaded.document.entityCount, 0)
        try await store.save(try sampleDocument().serialized())
        XCTAssertEqual(try files(in: dir), [])
        XCTAssertNil(try KeyStore.memory.loadKey())
    }

    func testAtomicReplaceAndMoveAside() throws {
        let dir = try makeTemporaryDirectory(self)
        let path = "\(dir)/nested/deeper/file"
        XCTAssertNil(try AtomicFile.read(path))
        try AtomicFile.makeDirectory(AtomicFile.parentDirectory(of: path))
        try AtomicFile.replace(path, with: Array("one".utf8))
        try AtomicFile.replace(path, with: Array("two".utf8), mode: 0o640)
        XCTAssertEqual(try AtomicFile.read(path), Array("two".utf8))
        XCTAssertEqual(fileMode(path), 0o640)
        let first = try AtomicFile.moveAside(path, reason: "unreadable")
        try AtomicFile.replace(path, with: [])
        let second = try AtomicFile.moveAside(path, reason: "unreadable")
        XCTAssertNotEqual(first, second)
        XCTAssertFalse(AtomicFile.exists(path))
        XCTAssertEqual(try AtomicFile.read(first), Array("two".utf8))
        XCTAssertEqual(try AtomicFile.read(second), [])
        XCTAssertEqual(AtomicFile.parentDirectory(of: "/x"), "/")
        XCTAssertEqual(AtomicFile.parentDirectory(of: "x"), ".")
    }

    // MARK: Broker group commit

    private func makeBroker(_ dir: String, writeDelay: Duration = .milliseconds(20)) async throws -> Broker {
        let store = CacheStore(path: "\(dir)/cache.bin", keyStore: .file(path: "\(dir)/cache.key"))
        let broker = Broker(store: store, writeDelay: writeDelay, logger: Logger(label: "brokercore-tests"))
        try await broker.start()
        return broker
    }

    func testConcurrentCommitsAreCoalesced() async throws {
        let dir = try makeTemporaryDirectory(self)
        let broker = try await makeBroker(dir)
        let writesBefore = await broker.writeCount
        XCTAssertEqual(writesBefore, 0)
        let finished = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<50 {
                group.addTask {
                    try await broker.commit()
                    return i
                }
            }
            var done = 0
            for try await _ in group { done += 1 }
            return done
        }
        XCTAssertEqual(finished, 50, "every commit returns")
        let writes = await broker.writeCount
        XCTAssertGreaterThanOrEqual(writes, 1)
        XCTAssertLessThanOrEqual(writes, 5, "50 concurrent commits must be coalesced")
        XCTAssertTrue(AtomicFile.exists("\(dir)/cache.bin"))
        let status = await broker.status()
        XCTAssertNil(status.lastWriteError)
        XCTAssertNotNil(status.lastWrite)

        // A commit after the burst is its own write, and also returns.
        try await broker.commit()
        let after = await broker.writeCount
        XCTAssertEqual(after, writes + 1)
    }

    func testImportIsDurableAcrossRestart() async throws {
        let dir = try makeTemporaryDirectory(self)
        let broker = try await makeBroker(dir)
        let report = try await broker.importCache(try Fixture.bytes("python"))
        XCTAssertEqual(report.added, 5)
        _ = try await broker.removeAccount(.username("JOHN.DOE@contoso.example"), forClient: "py_client_id")

        let restarted = try await makeBroker(dir)
        let status = await restarted.status()
        XCTAssertEqual(status.problems, [])
        XCTAssertEqual(status.accounts, 1)
        XCTAssertEqual(status.accessTokens, 0)
        XCTAssertEqual(status.refreshTokens, 1, "the family refresh token is kept")
        let visible = await restarted.accounts(visibleTo: "Py_Client_ID")
        XCTAssertEqual(visible.map(\.homeAccountId), [])
        let everyone = await restarted.accounts(visibleTo: nil)
        XCTAssertEqual(everyone.map(\.homeAccountId), ["uid.utid"])
        let exported = await restarted.exportCache()
        XCTAssertFalse(contains(exported, "hiddenAccounts"))
    }

    func testBrokerReportsAMovedAsideCache() async throws {
        let dir = try makeTemporaryDirectory(self)
        _ = try KeyStore.file(path: "\(dir)/cache.key").loadKey()
        try AtomicFile.replace("\(dir)/cache.bin", with: Array("garbage".utf8))
        let broker = try await makeBroker(dir)
        let status = await broker.status()
        XCTAssertEqual(status.problems.count, 1)
        XCTAssertEqual(status.accounts, 0)
        XCTAssertTrue(try files(in: dir).contains { $0.hasPrefix("cache.bin.unreadable-") })
    }
}
