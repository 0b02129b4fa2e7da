import BrokerPlatform
import BrokerCache
@testable import BrokerCore
import BrokerJSON
import BrokerStore
import Foundation
import Logging
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The cache database, its key, files that cannot be used, the migration of the old cache file, and the broker's
/// group commit of changed rows.
final class PersistenceTests: XCTestCase {
    private func sampleCache(secret: String = "fake-plaintext-secret-1") -> TokenCache {
        var cache = TokenCache()
        cache.add(.accessToken, accessToken(hid: "uid.utid", client: "client-a", realm: "tenant", target: "User.Read",
                                            secret: secret))
        cache.add(.account, accountEntry(hid: "uid.utid", realm: "tenant", username: "user@contoso.example"))
        cache.setOtherSection("customized", json: #""whatever""#)
        return cache
    }

    private func files(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    private func database(in dir: String) throws -> [UInt8] {
        try ["cache.db", "cache.db-wal"].flatMap { (try AtomicFile.read("\(dir)/\($0)")) ?? [] }
    }

    func testSaveLoadRoundTripWithNewKeyFile() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyPath = "\(dir)/keys/cache.key", cachePath = "\(dir)/state/cache.db"
        let store = CacheStore(path: cachePath, keyStore: .file(path: keyPath))
        let first = try await store.load()
        XCTAssertEqual(first.cache.document.entityCount, 0)
        XCTAssertEqual(first.problems, [])
        XCTAssertEqual(fileMode(keyPath), 0o600)
        XCTAssertEqual(try AtomicFile.read(keyPath)?.count, 32)

        let cache = sampleCache()
        try await store.write(cache.allRows().map(cache.value(of:)))
        XCTAssertFalse(contains(try database(in: "\(dir)/state"), "fake-plaintext-secret-1"), "secrets are sealed")
        XCTAssertEqual(fileMode(cachePath), 0o600)
        await store.close()

        // A new store (a restart) with the same key file reads it back.
        let loaded = try await CacheStore(path: cachePath, keyStore: .file(path: keyPath)).load()
        XCTAssertEqual(loaded.problems, [])
        XCTAssertEqual(loaded.cache.document, cache.document)
        XCTAssertEqual(loaded.cache.secrets(.accessToken, CacheQuery(clientId: "client-a")), ["fake-plaintext-secret-1"])
        XCTAssertEqual(loaded.cache.otherSection("customized"), #""whatever""#)
    }

    /// One change is written as its own rows: the rest of the cache is not rewritten.
    func testAChangeWritesOnlyItsRows() async throws {
        let dir = try makeTemporaryDirectory(self)
        let broker = try await makeBroker(dir)
        _ = try await broker.importCache(try Fixture.bytes("python"))
        let imported = await broker.lastWriteRows
        XCTAssertGreaterThan(imported, 5)
        let report = try await broker.removeAccount(.username("JOHN.DOE@contoso.example"), forClient: "py_client_id")
        let removal = await broker.lastWriteRows
        XCTAssertLessThan(removal, imported)
        XCTAssertEqual(removal, report.accessTokens + report.idTokens + report.refreshTokens + 1,
                       "the removed entries and brokerd's state row (the account is now hidden from the app)")
    }

    /// A large cache is loaded in two parts at once (CacheStore.loadAll): the cache is the one a load in one part
    /// gives, whichever part brokerd's state, token uses, unknown sections and unparsed entries are in, and a row
    /// that cannot be opened in the second part is reported as it would be in the first.
    func testALoadInTwoPartsGivesWhatALoadInOneGives() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyStore = KeyStore.file(path: "\(dir)/cache.key")
        let store = CacheStore(path: "\(dir)/cache.db", keyStore: keyStore)
        _ = try await store.load()
        var cache = TokenCache()
        for n in 0..<300 {
            let hid = "uid\(n).utid"
            cache.add(.accessToken, accessToken(hid: hid, client: "client-a", realm: "tenant", target: "User.Read",
                                                secret: "fake-at-\(n)"))
            cache.add(.refreshToken, refreshToken(hid: hid, client: "client-a", secret: "fake-rt-\(n)"))
            cache.add(.account, accountEntry(hid: hid, realm: "tenant", username: "user\(n)@contoso.example"))
            if n % 7 == 0 {
                cache.noteUse(TokenUse(clientId: "client-a", homeAccountId: hid, authority: "https://login.example/tenant",
                                       scopes: ["User.Read"], lastUsed: Int64(1_000 + n)))
            }
        }
        cache.state.hide("uid3.utid", from: "client-a")
        var unparsed = CacheDocument()
        unparsed.opaqueEntries[.accessToken] = ["not-an-object": "42"]
        _ = cache.merge(unparsed)
        cache.setOtherSection("customized", json: #""whatever""#)
        try await store.write(cache.allRows().map(cache.value(of:)))
        await store.close()

        func load(inTwoPartsFrom rows: Int) async throws -> CacheStore.Loaded {
            let store = CacheStore(path: "\(dir)/cache.db", keyStore: keyStore)
            guard case .stored = try await store.open(withReader: false) else {
                XCTFail("the database was not opened")
                return try await store.load()
            }
            let loaded = try await store.loadAll(inTwoPartsFrom: rows)
            await store.close()
            return loaded
        }
        let whole = try await load(inTwoPartsFrom: .max), parts = try await load(inTwoPartsFrom: 0)
        XCTAssertEqual(whole.problems, [])
        XCTAssertEqual(parts.problems, [])
        XCTAssertEqual(whole.cache.document, cache.document)
        XCTAssertEqual(whole.cache.state, cache.state)
        XCTAssertEqual(parts.cache.document, whole.cache.document)
        XCTAssertEqual(parts.cache.state, whole.cache.state)
        XCTAssertEqual(parts.cache.state.uses.count, 43)
        XCTAssertEqual(parts.cache.homeAccountCount, 300, "the index covers both parts")
        XCTAssertEqual(parts.cache.secrets(.refreshToken, CacheQuery(homeAccountId: "uid299.utid")), ["fake-rt-299"])

        // An entry that cannot be read, written last (so read by the second part): reported, the rest loads.
        let database = try CacheDatabase(path: "\(dir)/cache.db", key: try XCTUnwrap(keyStore.loadKey()).key)
        try database.apply([.put(StoredRow(section: "RefreshToken", key: "zz-broken", body: Array("not json".utf8),
                                           secret: Array("fake-rt-broken".utf8)))])
        database.close()
        let damaged = try await load(inTwoPartsFrom: 0)
        XCTAssertEqual(damaged.problems.count, 1, "\(damaged.problems)")
        XCTAssertTrue(damaged.problems.first?.contains("RefreshToken/zz-broken could not be read") == true, "\(damaged.problems)")
        XCTAssertFalse(damaged.problems.joined().contains("fake-rt-broken"), "no secret in a problem")
        XCTAssertEqual(damaged.cache.document, cache.document)
    }

    private func assertMovedAside(_ dir: String, store: CacheStore, file: StaticString = #filePath,
                                  line: UInt = #line) async throws {
        let loaded = try await store.load()
        XCTAssertEqual(loaded.cache.document.entityCount, 0, file: file, line: line)
        XCTAssertEqual(loaded.cache.document.otherSections.count, 0, file: file, line: line)
        XCTAssertEqual(loaded.problems.count, 1, "a problem is reported: \(loaded.problems)", file: file, line: line)
        let problem = loaded.problems.first ?? ""
        let names = try files(in: dir)
        let aside = names.filter { $0.contains(".unreadable-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
        XCTAssertEqual(aside.count, 1, "\(names)", file: file, line: line)
        XCTAssertTrue(problem.contains(aside.first ?? "?"), "the problem names the new file: \(problem)", file: file, line: line)
    }

    private func savedDatabase(_ dir: String) async throws -> KeyStore {
        let keyStore = KeyStore.file(path: "\(dir)/cache.key")
        let store = CacheStore(path: "\(dir)/cache.db", keyStore: keyStore)
        _ = try await store.load()
        let cache = sampleCache()
        try await store.write(cache.allRows().map(cache.value(of:)))
        await store.close()
        return keyStore
    }

    /// A database the key does not open is never moved or replaced: it waits for its key (WaitingCacheTests).
    private func assertWaits(_ dir: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        let before = try XCTUnwrap(try AtomicFile.read("\(dir)/cache.db"), file: file, line: line)
        let store = CacheStore(path: "\(dir)/cache.db", keyStore: .file(path: "\(dir)/cache.key"))
        let loaded = try await store.load()
        XCTAssertEqual(loaded.cache.document.entityCount, 0, file: file, line: line)
        let waiting = await store.waiting
        XCTAssertEqual(waiting, ["\(dir)/cache.db"], file: file, line: line)
        let inUse = await store.path
        XCTAssertTrue(inUse.hasPrefix("\(dir)/cache-") && inUse.hasSuffix(".db"), inUse, file: file, line: line)
        await store.close()
        XCTAssertEqual(try AtomicFile.read("\(dir)/cache.db"), before, "kept as it was", file: file, line: line)
        XCTAssertFalse(try files(in: dir).contains { $0.contains("unreadable") }, file: file, line: line)
    }

    func testDatabaseOfAnotherKeyWaitsForItsKey() async throws {
        let dir = try makeTemporaryDirectory(self)
        _ = try await savedDatabase(dir)
        try AtomicFile.replace("\(dir)/cache.key", with: Array(repeating: 9, count: 32))
        try await assertWaits(dir)
    }

    func testGarbageDatabaseIsMovedAside() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyStore = KeyStore.file(path: "\(dir)/cache.key")
        _ = try keyStore.loadKey()  // an existing key, so only the database is at fault
        let garbage = Array(repeating: UInt8(7), count: 8192)
        try AtomicFile.replace("\(dir)/cache.db", with: garbage)
        try await assertMovedAside(dir, store: CacheStore(path: "\(dir)/cache.db", keyStore: keyStore))
        let aside = try XCTUnwrap(try files(in: dir).first { $0.hasPrefix("cache.db.unreadable-") })
        XCTAssertEqual(try AtomicFile.read("\(dir)/\(aside)"), garbage, "moved, never rewritten")
    }

    func testDatabaseWithoutItsKeyWaitsForItsKey() async throws {
        let dir = try makeTemporaryDirectory(self)
        _ = try await savedDatabase(dir)
        XCTAssertEqual(unlink("\(dir)/cache.key"), 0)
        try await assertWaits(dir)
        XCTAssertEqual(fileMode("\(dir)/cache.key"), 0o600)
    }

    /// The cache file of earlier versions is written into the database once and kept as a backup.
    func testOldCacheFileIsMigratedOnce() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyStore = KeyStore.file(path: "\(dir)/cache.key")
        let key = try XCTUnwrap(try keyStore.loadKey()).key
        var old = sampleCache()
        old.state.hide("uid.utid", from: "client-b")
        let legacyBytes = try LegacyCacheFile.seal(old.persisted(), key: key)
        try AtomicFile.replace("\(dir)/cache.bin", with: legacyBytes)

        let migrated = try await CacheStore(path: "\(dir)/cache.db", keyStore: keyStore).load()
        XCTAssertEqual(migrated.problems, [])
        XCTAssertEqual(migrated.cache.document, old.document)
        XCTAssertTrue(migrated.cache.state.isHidden("uid.utid", from: "client-b"))
        let names = try files(in: dir)
        XCTAssertFalse(names.contains("cache.bin"))
        let backup = try XCTUnwrap(names.first { $0.hasPrefix("cache.bin.migrated-") }, "\(names)")
        XCTAssertEqual(try AtomicFile.read("\(dir)/\(backup)"), legacyBytes, "the old file is kept as it was")

        // The next start reads the database; the backup is not read again.
        let again = try await CacheStore(path: "\(dir)/cache.db", keyStore: keyStore).load()
        XCTAssertEqual(again.problems, [])
        XCTAssertEqual(again.cache.document, old.document)
        XCTAssertTrue(again.cache.state.isHidden("uid.utid", from: "client-b"))
    }

    func testUnreadableOldCacheFileIsMovedAside() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyStore = KeyStore.file(path: "\(dir)/cache.key")
        _ = try keyStore.loadKey()
        try AtomicFile.replace("\(dir)/cache.bin", with: LegacyCacheFile.header + Array(repeating: 7, count: 64))
        let loaded = try await CacheStore(path: "\(dir)/cache.db", keyStore: keyStore).load()
        XCTAssertEqual(loaded.cache.document.entityCount, 0)
        XCTAssertEqual(loaded.problems.count, 1)
        XCTAssertTrue(loaded.problems[0].contains("cannot be decrypted"), loaded.problems[0])
        XCTAssertTrue(try files(in: dir).contains { $0.hasPrefix("cache.bin.unreadable-") })
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
            _ = try await CacheStore(path: "\(dir)/cache.db", keyStore: keyStore).load()
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
        let store = CacheStore(path: "\(dir)/cache.db", keyStore: .memory)
        let persists = await store.persists
        XCTAssertFalse(persists)
        let loaded = try await store.load()
        XCTAssertEqual(loaded.problems, [])
        XCTAssertEqual(loaded.cache.document.entityCount, 0)
        let cache = sampleCache()
        try await store.write(cache.allRows().map(cache.value(of:)))
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

    private func makeBroker(_ dir: String, writeDelay: Duration = .zero) async throws -> Broker {
        let store = CacheStore(path: "\(dir)/cache.db", keyStore: .file(path: "\(dir)/cache.key"))
        let broker = Broker(store: store, writeDelay: writeDelay, logger: Logger(label: "brokercore-tests"))
        try await broker.start()
        return broker
    }

    /// With a coalescing window (write_delay_ms), a burst of commits is one or a few writes. (Without one, the
    /// default, commits arriving during a write still share the next write.)
    func testConcurrentCommitsAreCoalesced() async throws {
        let dir = try makeTemporaryDirectory(self)
        let broker = try await makeBroker(dir, writeDelay: .milliseconds(20))
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
        XCTAssertTrue(AtomicFile.exists("\(dir)/cache.db"))
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

    /// An import of several parts is written while it is merged, in more than one transaction, and the answer comes
    /// when all of it is durable: a restart finds every entry.
    func testALargeImportIsWrittenWhileMergedAndIsWholeWhenAnswered() async throws {
        let dir = try makeTemporaryDirectory(self)
        let broker = try await makeBroker(dir)
        let tokens = Broker.importPartSize * 2 + 17
        var document = CacheDocument()
        for number in 0..<tokens {
            let entity = CacheEntity(fields: JSONObject([
                .init(key: "credential_type", value: .string("AccessToken")),
                .init(key: "secret", value: .string("fake-at-\(number)")),
                .init(key: "home_account_id", value: .string("uid\(number % 50).utid")),
                .init(key: "environment", value: .string("login.example.com")),
                .init(key: "client_id", value: .string("client")),
                .init(key: "realm", value: .string("utid")),
                .init(key: "target", value: .string("scope.\(number)")),
                .init(key: "expires_on", value: .string("4000000000")),
            ]))
            document.entries[.accessToken, default: [:]][entity.canonicalKey(as: .accessToken)] = entity
        }
        let report = try await broker.importDocument(document)
        XCTAssertEqual(report.added, tokens)
        let writes = await broker.writeCount
        XCTAssertGreaterThan(writes, 1, "the first parts are written while the rest are merged")

        let restarted = try await makeBroker(dir)
        let status = await restarted.status()
        XCTAssertEqual(status.problems, [])
        XCTAssertEqual(status.accessTokens, tokens)
    }

    /// A commit no longer folds the write-ahead log into the database (SQLite would at 1,000 pages, inside the commit
    /// its waiter waits for): the writer does, once caught up, when enough rows went in since the last time.
    func testTheWriteAheadLogIsFoldedInWhenDueNotInsideACommit() async throws {
        let dir = try makeTemporaryDirectory(self)
        let store = CacheStore(path: "\(dir)/cache.db", keyStore: .file(path: "\(dir)/cache.key"))
        _ = try await store.load()
        func size(_ file: String) -> Int { (try? AtomicFile.read("\(dir)/\(file)"))?.count ?? 0 }
        var cache = TokenCache()
        let secret = String(repeating: "s", count: 4_000)
        for number in 0..<(CacheStore.checkpointRows / 2) {
            cache.add(.accessToken, accessToken(hid: "uid.utid", client: "client", realm: "utid", target: "scope.\(number)",
                                                secret: secret))
        }
        try await store.write(cache.allRows().map(cache.value(of:)))
        let notDue = await store.checkpointIfDue()
        XCTAssertFalse(notDue, "fewer rows than a checkpoint waits for")
        for number in 0..<CacheStore.checkpointRows {
            cache.add(.accessToken, accessToken(hid: "uid.utid", client: "client", realm: "utid", target: "more.\(number)",
                                                secret: secret))
        }
        try await store.write(cache.allRows().map(cache.value(of:)))
        let before = size("cache.db")
        XCTAssertGreaterThan(size("cache.db-wal"), CacheStore.checkpointRows * 4_000, "the commits left their pages in the log")
        XCTAssertLessThan(before, CacheStore.checkpointRows * 4_000)
        let due = await store.checkpointIfDue()
        XCTAssertTrue(due)
        XCTAssertGreaterThan(size("cache.db"), before + CacheStore.checkpointRows * 4_000, "the log's pages are in the database")
        let again = await store.checkpointIfDue()
        XCTAssertFalse(again, "nothing written since")
        await store.close()
    }

    /// Imports from two callers at once, many times: each returns. An import's commit that comes while the writer is
    /// away folding the log in (or seeing whether that is due) finds the writer running, so the writer must look again
    /// before it stops: a lost commit never returned.
    func testEveryCommitReturnsWhileTheWriterFoldsTheLogIn() async throws {
        let dir = try makeTemporaryDirectory(self)
        let broker = try await makeBroker(dir)
        let done = Locked(0), stop = Locked(false)
        defer { stop.withLock { $0 = true } }
        // Busy threads, as a loaded machine has: the writer's trips to the store take long enough for commits to come.
        // (Without the second look, this failed in each of two runs.)
        for _ in 0..<4 {
            Thread.detachNewThread {
                var spin = 0
                while !stop.withLock({ $0 }) { spin &+= 1 }
            }
        }
        for caller in 0..<2 {
            Task {
                for round in 0..<150 {
                    var document = CacheDocument()
                    for number in 0..<20 {
                        let entity = accessToken(hid: "uid.utid", client: "client", realm: "utid",
                                                 target: "scope.\(caller).\(round).\(number)", secret: "fake-at")
                        document.entries[.accessToken, default: [:]][entity.canonicalKey(as: .accessToken)] = entity
                    }
                    _ = try await broker.importDocument(document)
                }
                done.withLock { $0 += 1 }
            }
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while done.withLock({ $0 }) < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertEqual(done.withLock { $0 }, 2, "an import's commit never returned")
    }

    func testBrokerReportsAMovedAsideCache() async throws {
        let dir = try makeTemporaryDirectory(self)
        _ = try KeyStore.file(path: "\(dir)/cache.key").loadKey()
        try AtomicFile.replace("\(dir)/cache.db", with: Array(repeating: 0x47, count: 4096))
        let broker = try await makeBroker(dir)
        let status = await broker.status()
        XCTAssertEqual(status.problems.count, 1)
        XCTAssertEqual(status.accounts, 0)
        XCTAssertTrue(try files(in: dir).contains { $0.hasPrefix("cache.db.unreadable-") })
    }
}
