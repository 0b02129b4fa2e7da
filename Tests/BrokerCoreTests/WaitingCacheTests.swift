import BrokerCache
@testable import BrokerCore
import BrokerPlatform
@testable import BrokerStore
import Foundation
import Logging
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A cache whose key the key store lost waits for it, untouched, while a new cache serves; when a key that opens it is
/// at hand again it is merged back with import's rules. Real files, real SQLite, the file key store.
final class WaitingCacheTests: XCTestCase {
    private let alice = "uid-alice.utid", bob = "uid-bob.utid", carol = "uid-carol.utid"

    private func broker(_ dir: String) async throws -> Broker {
        let broker = Broker(store: CacheStore(path: "\(dir)/cache.db", keyStore: .file(path: "\(dir)/cache.key")),
                            logger: Logger(label: "waiting-cache-tests"))
        try await broker.start()
        return broker
    }

    private func signIn(_ broker: Broker, _ hid: String) async throws {
        var cache = TokenCache()
        cache.add(.account, accountEntry(hid: hid, realm: "utid", username: "\(hid)@example.com"))
        cache.add(.refreshToken, refreshToken(hid: hid, client: "client-a", secret: "fake-rt-\(hid)"))
        _ = try await broker.importDocument(cache.document)
    }

    private func accounts(_ broker: Broker) async -> [String] {
        await broker.accounts(visibleTo: nil).map(\.homeAccountId).sorted()
    }

    private func names(_ dir: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.contains(".db") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }.sorted()
    }

    private func key(_ dir: String) throws -> [UInt8] { try XCTUnwrap(try AtomicFile.read("\(dir)/cache.key")) }

    /// Alice signed in under one key, which is then lost: brokerd starts on a new key with Alice's database waiting.
    private func lostKey(_ dir: String) async throws -> (oldKey: [UInt8], broker: Broker) {
        let first = try await broker(dir)
        try await signIn(first, alice)
        await first.flush()
        let oldKey = try key(dir)
        XCTAssertEqual(unlink("\(dir)/cache.key"), 0)
        let second = try await broker(dir)
        let served = await accounts(second)
        XCTAssertEqual(served, [], "a new, empty cache serves")
        let waiting = await second.waitingDatabases()
        XCTAssertEqual(waiting, ["\(dir)/cache.db"])
        let status = await second.status()
        XCTAssertTrue(status.problems.contains { $0.contains("\(dir)/cache.db cannot be opened") && $0.contains("waiting") },
                      "\(status.problems)")
        XCTAssertEqual(status.waitingCaches, ["\(dir)/cache.db"])
        XCTAssertNotEqual(status.cachePath, "\(dir)/cache.db")
        return (oldKey, second)
    }

    func testAKeyTheUserHoldsMergesTheWaitingCacheAndNothingIsLost() async throws {
        let dir = try makeTemporaryDirectory(self)
        let (oldKey, broker) = try await lostKey(dir)
        try await signIn(broker, bob)

        let recovery = try await broker.recoverWaitingCaches(key: oldKey)
        XCTAssertEqual(recovery.merged.map(\.file), ["\(dir)/cache.db"])
        XCTAssertEqual(recovery.waiting, [])
        let served = await accounts(broker)
        XCTAssertEqual(served, [alice, bob].sorted())
        let files = try names(dir)
        XCTAssertFalse(files.contains("cache.db"), "retired once merged: \(files)")
        let stillComplains = (await broker.status()).problems.contains { $0.contains("waiting") }
        XCTAssertFalse(stillComplains)
        await broker.flush()

        let restarted = try await self.broker(dir)
        let servedAfterRestart = await accounts(restarted)
        XCTAssertEqual(servedAfterRestart, [alice, bob].sorted(), "the merge is durable")
        let waitingAfterRestart = await restarted.waitingDatabases()
        XCTAssertEqual(waitingAfterRestart, [])
        await restarted.flush()
    }

    /// The key store holds the old key again (the old keyring is back): the merged cache moves into the database that
    /// key opens, so that the next start, with that key, opens everything.
    func testTheStoresOldKeyBackMovesTheMergedCacheIntoItsDatabase() async throws {
        let dir = try makeTemporaryDirectory(self)
        let (oldKey, broker) = try await lostKey(dir)
        try await signIn(broker, bob)
        let statusBefore = await broker.status()
        let newDatabase = try XCTUnwrap(statusBefore.cachePath)
        try AtomicFile.replace("\(dir)/cache.key", with: oldKey, mode: 0o600)

        let recovery = try await broker.recoverWaitingCaches()
        XCTAssertEqual(recovery.merged.map(\.file), ["\(dir)/cache.db"])
        let inUse = (await broker.status()).cachePath
        XCTAssertEqual(inUse, "\(dir)/cache.db")
        XCTAssertEqual(try names(dir), ["cache.db"], "the database used meanwhile is retired: \(newDatabase)")
        try await signIn(broker, carol)  // a change after the move goes to the database now in use
        await broker.flush()

        let restarted = try await self.broker(dir)
        XCTAssertEqual(try key(dir), oldKey)
        let servedAfterRestart = await accounts(restarted)
        XCTAssertEqual(servedAfterRestart, [alice, bob, carol].sorted())
        let waitingAfterRestart = await restarted.waitingDatabases()
        XCTAssertEqual(waitingAfterRestart, [])
        await restarted.flush()
    }

    /// A store that came up empty while brokerd ran gets the key in use, so that the next start opens the cache.
    func testAnEmptiedStoreGetsTheKeyInUse() async throws {
        let dir = try makeTemporaryDirectory(self)
        let broker = try await broker(dir)
        try await signIn(broker, alice)
        let inUse = try key(dir)
        XCTAssertEqual(unlink("\(dir)/cache.key"), 0)
        _ = try await broker.recoverWaitingCaches()
        XCTAssertEqual(try key(dir), inUse)
        await broker.flush()
        let restarted = try await self.broker(dir)
        let servedAfterRestart = await accounts(restarted)
        XCTAssertEqual(servedAfterRestart, [alice])
        let waitingAfterRestart = await restarted.waitingDatabases()
        XCTAssertEqual(waitingAfterRestart, [])
        await restarted.flush()
    }

    func testResetKeepsTheDatabaseAndRecoverCanStillOpenIt() async throws {
        let dir = try makeTemporaryDirectory(self)
        let (oldKey, broker) = try await lostKey(dir)
        let before = try XCTUnwrap(try AtomicFile.read("\(dir)/cache.db"))
        let kept = try await broker.giveUpWaitingCaches()
        XCTAssertEqual(kept.count, 1)
        XCTAssertTrue(kept[0].hasPrefix("\(dir)/cache.db.given-up-"), kept[0])
        XCTAssertEqual(try AtomicFile.read(kept[0]), before, "kept as it was")
        let waiting = await broker.waitingDatabases()
        XCTAssertEqual(waiting, [])
        let stillComplains = (await broker.status()).problems.contains { $0.contains("waiting") }
        XCTAssertFalse(stillComplains)

        let mergedWithoutKey = (try await broker.recoverWaitingCaches()).merged.count
        XCTAssertEqual(mergedWithoutKey, 0, "a database given up is not tried")
        let recovery = try await broker.recoverWaitingCaches(key: oldKey, database: kept[0])
        XCTAssertEqual(recovery.merged.count, 1)
        let served = await accounts(broker)
        XCTAssertEqual(served, [alice])
        XCTAssertFalse(FileManager.default.fileExists(atPath: kept[0]))
        await broker.flush()
    }

    func testAWrongKeyLeavesTheDatabaseWaitingAndAKeyOfAnotherSizeIsRefused() async throws {
        let dir = try makeTemporaryDirectory(self)
        let (_, broker) = try await lostKey(dir)
        let recovery = try await broker.recoverWaitingCaches(key: Array(repeating: 7, count: 32))
        XCTAssertEqual(recovery.merged.count, 0)
        XCTAssertEqual(recovery.waiting, ["\(dir)/cache.db"])
        do {
            _ = try await broker.recoverWaitingCaches(key: [1, 2, 3])
            XCTFail("a 3-byte key was taken")
        } catch Broker.Failure.invalidKey(let bytes) {
            XCTAssertEqual(bytes, 3)
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(dir)/cache.db"))
        await broker.flush()
    }

    /// Two databases the same key opens (a merge into another database that a kill cut short): the first serves, the
    /// other waits and is merged by the next recovery (brokerd runs one once the cache is loaded).
    func testASecondDatabaseTheKeyOpensIsMerged() async throws {
        let dir = try makeTemporaryDirectory(self)
        let first = try await broker(dir)
        try await signIn(first, alice)
        await first.flush()
        let copy = "\(dir)/cache-20200101T000000Z.db"
        try AtomicFile.replace(copy, with: try XCTUnwrap(try AtomicFile.read("\(dir)/cache.db")), mode: 0o600)

        let both = try await broker(dir)
        let inUse = await both.status().cachePath
        XCTAssertEqual(inUse, "\(dir)/cache.db", "the first the key opens")
        let waiting = await both.waitingDatabases()
        XCTAssertEqual(waiting, [copy])
        _ = try await both.signOut(.homeAccountId(alice))
        try await signIn(both, carol)
        _ = try await both.recoverWaitingCaches()
        let served = await accounts(both)
        XCTAssertEqual(served, [alice, carol].sorted(), "Alice comes back from the other database")
        XCTAssertEqual(try names(dir), ["cache.db"])
        await both.flush()
    }

    /// A database a newer brokerd wrote (a downgrade) is kept as it is too, never moved, and not tried with keys.
    func testADatabaseOfANewerBrokerdIsKeptAsItIs() async throws {
        let dir = try makeTemporaryDirectory(self)
        let first = try await broker(dir)
        try await signIn(first, alice)
        await first.flush()
        let raw = try SQLiteConnection(path: "\(dir)/cache.db")
        try raw.exec("PRAGMA user_version = 99")
        raw.close()
        let before = try XCTUnwrap(try AtomicFile.read("\(dir)/cache.db"))

        let older = try await broker(dir)
        let status = await older.status()
        XCTAssertEqual(status.waitingCaches, ["\(dir)/cache.db"])
        XCTAssertTrue(status.problems.contains { $0.contains("schema version 99, written by a newer brokerd") }, "\(status.problems)")
        let recovery = try await older.recoverWaitingCaches()
        XCTAssertEqual(recovery.problems, [], "not tried with keys")
        XCTAssertEqual(recovery.waiting, ["\(dir)/cache.db"])
        await older.flush()
        XCTAssertEqual(try AtomicFile.read("\(dir)/cache.db"), before, "kept as it was")
    }
}
