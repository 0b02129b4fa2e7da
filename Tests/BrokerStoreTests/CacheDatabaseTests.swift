@testable import BrokerStore
import Crypto
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The SQLite cache store against real files and the real SQLite library.
final class CacheDatabaseTests: XCTestCase {
    private var directory = ""
    private var path: String { "\(directory)/cache.db" }
    private let key = SymmetricKey(size: .bits256)

    override func setUpWithError() throws {
        var template = Array("/tmp/brokerstore-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        directory = String(cString: try XCTUnwrap(made))
    }

    override func tearDown() {
        removeDirectory(directory)
    }

    // MARK: Round trips

    func testRoundTripOfRowsWithAndWithoutSecrets() throws {
        let rows = [
            StoredRow(section: "AccessToken", key: "uid.utid-login.example-accesstoken-client-tenant-user.read",
                      body: Array(#"{"expires_on":"1700000000"}"#.utf8), secret: Array("at-secret".utf8)),
            StoredRow(section: "Account", key: "uid.utid-login.example-tenant", body: Array(#"{"username":"u"}"#.utf8)),
            // Bodies are bytes, not C strings: NULs, invalid UTF-8 and an empty body survive.
            StoredRow(section: "brokerd", key: "binary", body: [0, 1, 0xff, 0, 0xc3, 0x28, 0], secret: [0, 0, 0xff]),
            StoredRow(section: "Other", key: "empty", body: [], secret: []),
            StoredRow(section: "Unicode ✓", key: "clé\u{0}with-nul", body: Array("é".utf8), secret: nil),
        ]
        let db = try CacheDatabase(path: path, key: key)
        try db.apply(rows.map { .put($0) })
        let loaded = try db.loadAll()
        XCTAssertEqual(loaded.problems, [])
        XCTAssertEqual(sorted(loaded.rows), sorted(rows))
        // An empty secret is a secret, distinct from none.
        XCTAssertEqual(loaded.rows.first { $0.key == "empty" }?.secret, [])
        XCTAssertNil(loaded.rows.first { $0.section == "Account" }?.secret)
    }

    func testPutReplaceDeleteAndDeleteAll() throws {
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(row("a", secret: "1")), .put(row("b", secret: "2")), .put(row("c"))])
        try db.apply([.put(row("a", body: "new", secret: nil)), .put(row("c", secret: "3")),
                      .delete(section: "AccessToken", key: "b"), .delete(section: "AccessToken", key: "absent")])
        XCTAssertEqual(sorted(try db.loadAll().rows), [row("a", body: "new", secret: nil), row("c", secret: "3")])

        // Changes apply in order within one transaction.
        try db.apply([.deleteAll, .put(row("d", secret: "4"))])
        XCTAssertEqual(try db.loadAll().rows, [row("d", secret: "4")])
        try db.apply([.put(row("e")), .deleteAll])
        XCTAssertEqual(try db.loadAll().rows, [])
        try db.apply([])
    }

    /// A batch is written in (section, key) order (RowChange.keyOrder), and that changes no outcome: changes to one
    /// row keep their order, and a deleteAll stays between the changes before and after it.
    func testBatchesAreWrittenInKeyOrderWithTheSameOutcome() throws {
        let changes: [RowChange] = [
            .put(row("c")), .put(StoredRow(section: "Account", key: "z", body: [])), .put(row("a", secret: "1")),
            .delete(section: "AccessToken", key: "a"), .put(row("b")), .deleteAll, .put(row("e")),
            .delete(section: "AccessToken", key: "d"), .put(row("d", secret: "2")),
        ]
        let order = RowChange.keyOrder(changes).map { offset -> String in
            let change = changes[offset]
            guard let place = change.place else { return "deleteAll" }
            if case .delete = change { return "delete \(place.section)/\(place.key)" }
            return "\(place.section)/\(place.key)"
        }
        XCTAssertEqual(order, ["AccessToken/a", "delete AccessToken/a", "AccessToken/b", "AccessToken/c", "Account/z",
                               "deleteAll", "delete AccessToken/d", "AccessToken/d", "AccessToken/e"])

        let db = try CacheDatabase(path: path, key: key)
        try db.apply(Array(changes.prefix(5)))
        XCTAssertEqual(sorted(try db.loadAll().rows).map(\.key), ["b", "c", "z"], "the put of a, then its delete")
        try db.apply(changes)
        XCTAssertEqual(sorted(try db.loadAll().rows), [row("d", secret: "2"), row("e")])
    }

    /// A batch's nonces come from one request for random bytes (RowSealer.seal): each secret is sealed under a
    /// nonce of its own, even the same secret in rows alike, and each opens under its row and no other.
    func testEachSecretOfABatchIsSealedUnderANonceOfItsOwn() throws {
        let db = try CacheDatabase(path: path, key: key)
        defer { db.close() }
        let changes: [RowChange] = (0..<200).map { .put(row("k\($0)", secret: "same")) } + [.put(row("plain"))]
        let secrets = try db.sealer.seal(changes)
        let sealed = secrets.compactMap { $0 }
        XCTAssertEqual(sealed.count, 200)
        XCTAssertNil(secrets.last!, "a row without a secret has nothing sealed")
        XCTAssertEqual(Set(sealed.map { Array($0.prefix(RowSealer.nonceSize)) }).count, 200, "no nonce twice")
        for (n, blob) in sealed.enumerated() {
            XCTAssertEqual(try blob.withUnsafeBytes { try db.sealer.open($0, section: "AccessToken", key: "k\(n)") },
                           Array("same".utf8))
            XCTAssertThrowsError(try blob.withUnsafeBytes { try db.sealer.open($0, section: "AccessToken", key: "k\(n + 1)") })
        }
    }

    func testRowsByRowidRange() throws {
        let db = try CacheDatabase(path: path, key: key)
        XCTAssertNil(try db.rowidBounds())
        let rows = (0..<10).map { row("k\($0)", secret: "s\($0)") }
        try db.apply(rows.map { .put($0) })
        let bounds = try XCTUnwrap(try db.rowidBounds())
        XCTAssertEqual(bounds.count, 10)
        let middle = bounds.lowerBound + 4
        var first: [StoredRow] = [], second: [StoredRow] = []
        XCTAssertEqual(try db.forEachRow(rowids: bounds.lowerBound...middle) { first.append($0) }, [])
        XCTAssertEqual(try db.forEachRow(rowids: (middle + 1)...bounds.upperBound) { second.append($0) }, [])
        XCTAssertEqual([first.count, second.count], [5, 5])
        XCTAssertEqual(sorted(first + second), sorted(rows))
    }

    func testReopeningSeesCommittedState() throws {
        do {
            let db = try CacheDatabase(path: path, key: key)
            try db.apply([.put(row("a", secret: "1")), .put(row("b", secret: "2"))])
            try db.apply([.delete(section: "AccessToken", key: "a")])
            db.close()
        }
        let reopened = try CacheDatabase(path: path, key: key)
        XCTAssertEqual(try reopened.loadAll().rows, [row("b", secret: "2")])
    }

    // MARK: Reading one account

    func testRowsOfOneAccountOrOneSection() throws {
        func owned(_ key: String, _ account: String?, section: String = "AccessToken", secret: String? = nil) -> StoredRow {
            StoredRow(section: section, key: key, body: Array("{}".utf8), secret: secret.map { Array($0.utf8) }, account: account)
        }
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(owned("a1", "a", secret: "s1")), .put(owned("a2", "a", section: "Account")),
                      .put(owned("b1", "b", secret: "s2")), .put(owned("meta", nil, section: "AppMetadata"))])
        XCTAssertEqual(sorted(try db.rows(ofAccount: "a").rows), [owned("a1", "a", secret: "s1"), owned("a2", "a", section: "Account")])
        XCTAssertEqual(try db.rows(ofAccount: "c").rows, [])
        XCTAssertEqual(try db.rows(inSection: "AppMetadata").rows, [owned("meta", nil, section: "AppMetadata")])
        XCTAssertEqual(Set(try db.loadAll().rows.map(\.account)), ["a", "b", nil], "the account is stored with the row")

        // A row that changes owner (or loses one) moves with it.
        try db.apply([.put(owned("a1", "b", secret: "s3")), .put(owned("a2", nil, section: "Account"))])
        XCTAssertEqual(try db.rows(ofAccount: "a").rows, [])
        XCTAssertEqual(sorted(try db.rows(ofAccount: "b").rows), [owned("a1", "b", secret: "s3"), owned("b1", "b", secret: "s2")])
    }

    /// A database of schema 1 (no `account` column) is upgraded once, each row's account taken from its body.
    func testSchemaOneIsUpgradedWithEachRowsAccount() throws {
        func body(_ account: String) -> [UInt8] { Array("{\"owner\":\"\(account)\"}".utf8) }
        do {
            let db = try CacheDatabase(path: path, key: key)
            try db.apply([.put(StoredRow(section: "AccessToken", key: "x1", body: body("x"), secret: Array("sx".utf8))),
                          .put(StoredRow(section: "AccessToken", key: "y1", body: body("y"))),
                          .put(StoredRow(section: "AppMetadata", key: "m", body: Array("{}".utf8)))])
            db.close()
            let raw = try SQLiteConnection(path: path)
            try raw.exec("DROP INDEX entries_by_account; ALTER TABLE entries DROP COLUMN account; PRAGMA user_version = 1")
            raw.close()
        }
        XCTAssertThrowsError(try CacheDatabase(path: path, key: SymmetricKey(size: .bits256)) { _, _ in XCTFail("upgraded"); return nil },
                             "another key: refused before anything is changed")
        var seen: [String] = []
        let db = try CacheDatabase(path: path, key: key) { section, bytes in
            seen.append(section)
            let text = String(decoding: bytes, as: UTF8.self)
            return text.contains("owner") ? String(text.split(separator: "\"")[3]) : nil
        }
        XCTAssertEqual(seen.sorted(), ["AccessToken", "AccessToken", "AppMetadata"])
        XCTAssertEqual(try db.rows(ofAccount: "x").rows.map(\.key), ["x1"])
        XCTAssertEqual(try db.rows(ofAccount: "x").rows.first?.secret, Array("sx".utf8))
        XCTAssertEqual(try db.rows(ofAccount: "y").rows.map(\.key), ["y1"])
        db.close()
        let again = try CacheDatabase(path: path, key: key) { _, _ in XCTFail("upgraded twice"); return nil }
        XCTAssertEqual(try again.rows(ofAccount: "x").rows.map(\.key), ["x1"])
    }

    // MARK: Files that cannot be used

    func testWrongKeyIsDetectedAtOpen() throws {
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(row("a", secret: "1"))])
        db.close()
        XCTAssertThrowsError(try CacheDatabase(path: path, key: SymmetricKey(size: .bits256))) { error in
            guard case CacheDatabase.Failure.wrongKey(let failed)? = error as? CacheDatabase.Failure else {
                return XCTFail("expected wrongKey, got \(error)")
            }
            XCTAssertEqual(failed, path)
        }
        // The file was not touched: the right key still opens it.
        XCTAssertEqual(try CacheDatabase(path: path, key: key).loadAll().rows, [row("a", secret: "1")])
    }

    func testGarbageFileIsNotADatabase() throws {
        writeFile(path, Array(repeating: "garbage, not SQLite. ", count: 500).joined().utf8.map { $0 })
        assertNotADatabase(try CacheDatabase(path: path, key: key))
        // A valid header over garbage pages is corrupt, not a crash.
        var header = Array("SQLite format 3\u{0}".utf8) + [0x10, 0x00, 1, 1, 0, 64, 32, 32]
        header += [UInt8](repeating: 0xa5, count: 8192 - header.count)
        writeFile(path, header)
        assertNotADatabase(try CacheDatabase(path: path, key: key))
    }

    func testForeignOrNewerDatabaseIsNotADatabase() throws {
        let foreign = try SQLiteConnection(path: path)
        try foreign.exec("CREATE TABLE notes(text TEXT)")
        foreign.close()
        assertNotADatabase(try CacheDatabase(path: path, key: key))

        let newer = "\(directory)/newer.db"
        try CacheDatabase(path: newer, key: key).close()
        let raw = try SQLiteConnection(path: newer)
        try raw.exec("PRAGMA user_version = 99")
        raw.close()
        XCTAssertThrowsError(try CacheDatabase(path: newer, key: key)) { error in
            guard case CacheDatabase.Failure.otherVersion(_, 99)? = error as? CacheDatabase.Failure else {
                return XCTFail("expected otherVersion, got \(error)")
            }
        }
    }

    // MARK: Sealing

    func testTamperedSecretIsSkippedAndReported() throws {
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(row("a", secret: "secret-a")), .put(row("b", secret: "secret-b")), .put(row("c"))])
        let raw = try SQLiteConnection(path: path)
        var sealed = try sealedBlob(raw, key: "b")
        sealed[sealed.count / 2] ^= 0x01
        try setSealed(raw, key: "b", to: sealed)
        raw.close()

        let loaded = try db.loadAll()
        XCTAssertEqual(sorted(loaded.rows), [row("a", secret: "secret-a"), row("c")])
        XCTAssertEqual(loaded.problems.count, 1)
        XCTAssertTrue(loaded.problems[0].contains("AccessToken") && loaded.problems[0].contains("\"b\""), loaded.problems[0])
        XCTAssertFalse(loaded.problems[0].contains("secret-b"))
    }

    func testSealedSecretCopiedToAnotherRowDoesNotOpen() throws {
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(row("a", secret: "secret-a")), .put(row("b", secret: "secret-b")),
                      .put(StoredRow(section: "RefreshToken", key: "a", body: [], secret: Array("rt".utf8)))])
        let raw = try SQLiteConnection(path: path)
        try setSealed(raw, key: "b", to: try sealedBlob(raw, key: "a"))
        // Same key, other section: the section is bound too.
        try raw.withStatement("UPDATE entries SET sealed = ?1 WHERE section = 'RefreshToken' AND key = 'a'") {
            try $0.bind(.blob(try sealedBlob(raw, key: "a")))
            try $0.step()
        }
        raw.close()

        let loaded = try db.loadAll()
        XCTAssertEqual(loaded.rows, [row("a", secret: "secret-a")])
        XCTAssertEqual(loaded.problems.count, 2, "\(loaded.problems)")
    }

    func testSecretsNeverReachTheFilesInPlaintext() throws {
        let marker = "PLAINTEXT-SECRET-MARKER-7f3a"
        let db = try CacheDatabase(path: path, key: key)
        try db.apply((0..<50).map { .put(row("k\($0)", secret: "\(marker)-\($0)")) })
        try db.apply([.put(row("k1", secret: "\(marker)-replaced")), .delete(section: "AccessToken", key: "k2")])
        // Before the WAL is checkpointed, and after close has merged it into the database.
        XCTAssertTrue(CacheDatabase.exists(path + "-wal"))
        for file in [path, path + "-wal", path + "-shm"] {
            XCTAssertFalse(contains(readFile(file), marker), file)
            XCTAssertEqual(fileMode(file), 0o600, file)
        }
        db.close()
        XCTAssertFalse(contains(readFile(path), marker))
        XCTAssertTrue(contains(readFile(path), "k49"), "the check would not see what it looks for")
    }

    // MARK: Transactions and crashes

    func testFailedTransactionLeavesPreviousState() throws {
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(row("a", secret: "1")), .put(row("b", secret: "2"))])
        // Root ignores file modes, so the failure is forced inside SQLite instead: a put of key "boom" aborts.
        let raw = try SQLiteConnection(path: path)
        try raw.exec("""
            CREATE TRIGGER boom BEFORE INSERT ON entries WHEN NEW.key = 'boom'
            BEGIN SELECT RAISE(ABORT, 'forced failure'); END
            """)
        raw.close()

        XCTAssertThrowsError(try db.apply([.deleteAll, .put(row("c", secret: "3")), .put(row("boom"))])) { error in
            guard case CacheDatabase.Failure.sqlite(let sqlite)? = error as? CacheDatabase.Failure else {
                return XCTFail("expected an SQLite failure, got \(error)")
            }
            XCTAssertEqual(sqlite.primaryCode, 19 /* SQLITE_CONSTRAINT */, "\(sqlite)")
        }
        XCTAssertEqual(sorted(try db.loadAll().rows), [row("a", secret: "1"), row("b", secret: "2")])
        // The connection is usable afterwards, and other processes see the same.
        try db.apply([.put(row("c", secret: "3"))])
        db.close()
        XCTAssertEqual(try CacheDatabase(path: path, key: key).loadAll().rows.count, 3)
    }

    func testUncommittedTransactionIsLostOnAbruptClose() throws {
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(row("a", secret: "1"))])
        let writer = try SQLiteConnection(path: path)
        try writer.exec("BEGIN IMMEDIATE")
        try writer.exec("DELETE FROM entries")
        try writer.exec("INSERT INTO entries(section, key, body) VALUES('AccessToken', 'ghost', x'')")
        writer.close()   // sqlite3_close_v2 with the transaction open

        XCTAssertEqual(try db.loadAll().rows, [row("a", secret: "1")])
        db.close()
        XCTAssertEqual(try CacheDatabase(path: path, key: key).loadAll().rows, [row("a", secret: "1")])
    }

    /// Copies the files while a large transaction has spilled pages into the WAL but not committed: the copy
    /// is what a power cut at that instant would leave, and it must show the last committed state.
    func testCrashSnapshotShowsOnlyCommittedTransactions() throws {
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(row("committed", secret: "1"))])
        let writer = try SQLiteConnection(path: path)
        try writer.exec("PRAGMA cache_size = 10")   // forces the transaction's pages out to the WAL early
        try writer.exec("BEGIN IMMEDIATE")
        try writer.exec("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
            INSERT INTO entries(section, key, body) SELECT 'AccessToken', 'uncommitted-' || i, randomblob(500) FROM n
            """)
        XCTAssertGreaterThan(readFile(path + "-wal").count, 100_000, "uncommitted frames reached the WAL")
        let snapshot = "\(directory)/snapshot.db"
        for suffix in ["", "-wal"] { writeFile(snapshot + suffix, readFile(path + suffix)) }
        try writer.exec("COMMIT")
        let afterCommit = "\(directory)/after-commit.db"
        for suffix in ["", "-wal"] { writeFile(afterCommit + suffix, readFile(path + suffix)) }
        writer.close()
        db.close()

        XCTAssertEqual(try CacheDatabase(path: snapshot, key: key).loadAll().rows, [row("committed", secret: "1")])
        XCTAssertEqual(try CacheDatabase(path: afterCommit, key: key).loadAll().rows.count, 2001)
    }

    // MARK: Files

    func testMoveAsideMovesTheCompanionsWithTheDatabase() throws {
        // A crash leaves the database with a WAL holding committed data; snapshot one while it is open.
        let db = try CacheDatabase(path: path, key: key)
        try db.apply([.put(row("a", secret: "1"))])
        let crashed = "\(directory)/crashed.db"
        for suffix in ["", "-wal", "-shm"] { writeFile(crashed + suffix, readFile(path + suffix)) }
        db.close()

        let aside = try CacheDatabase.moveAside(crashed, reason: "wrongkey")
        XCTAssertTrue(aside.hasPrefix("\(crashed).wrongkey-"), aside)
        for suffix in ["", "-wal", "-shm"] {
            XCTAssertFalse(CacheDatabase.exists(crashed + suffix), suffix)
            XCTAssertTrue(CacheDatabase.exists(aside + suffix), suffix)
        }
        // The moved files still form the database: the committed row lives only in the moved WAL.
        XCTAssertEqual(try CacheDatabase(path: aside, key: key).loadAll().rows, [row("a", secret: "1")])
        // A second move in the same second gets its own name.
        writeFile(crashed, [])
        let again = try CacheDatabase.moveAside(crashed, reason: "wrongkey")
        XCTAssertNotEqual(again, aside)
        XCTAssertThrowsError(try CacheDatabase.moveAside("\(directory)/absent.db", reason: "x"))
    }

    func testNewDatabaseIsPrivateAndIgnoresAStaleWAL() throws {
        // Another database's WAL left behind after its database file was deleted by hand: replaying it into the
        // new file would resurrect the old rows.
        let other = "\(directory)/other.db"
        let db = try CacheDatabase(path: other, key: key)
        try db.apply([.put(row("other", secret: "x"))])
        writeFile(path + "-wal", readFile(other + "-wal"))
        db.close()

        let fresh = try CacheDatabase(path: path, key: key)
        XCTAssertEqual(fileMode(path), 0o600)
        XCTAssertEqual(try fresh.loadAll().rows, [])
        try fresh.apply([.put(row("a"))])
        XCTAssertEqual(fileMode(path + "-wal"), 0o600)
        let raw = try SQLiteConnection(path: path)
        defer { raw.close() }
        XCTAssertEqual(try raw.withStatement("PRAGMA page_size") { try $0.step(); return $0.int64(0) }, Int64(16_384))
        XCTAssertEqual(try raw.withStatement("PRAGMA journal_mode") { try $0.step(); return $0.text(0) }, "wal")
    }

    func testMissingDirectoryAndClosedDatabaseThrow() throws {
        XCTAssertThrowsError(try CacheDatabase(path: "\(directory)/missing/cache.db", key: key)) { error in
            XCTAssertTrue(error is CacheDatabase.Failure, "\(error)")
        }
        let db = try CacheDatabase(path: path, key: key)
        db.close()
        XCTAssertThrowsError(try db.apply([.put(row("a"))]))
        XCTAssertThrowsError(try db.loadAll())
        db.close()
    }

    // MARK: Helpers

    private func row(_ key: String, body: String = "{}", secret: String? = nil) -> StoredRow {
        StoredRow(section: "AccessToken", key: key, body: Array(body.utf8), secret: secret.map { Array($0.utf8) })
    }

    private func sorted(_ rows: [StoredRow]) -> [StoredRow] {
        rows.sorted { ($0.section, $0.key) < ($1.section, $1.key) }
    }

    private func assertNotADatabase(_ open: @autoclosure () throws -> CacheDatabase, line: UInt = #line) {
        XCTAssertThrowsError(try open(), line: line) { error in
            guard case CacheDatabase.Failure.notADatabase? = error as? CacheDatabase.Failure else {
                return XCTFail("expected notADatabase, got \(error)", line: line)
            }
        }
    }

    private func sealedBlob(_ raw: SQLiteConnection, key: String) throws -> [UInt8] {
        try raw.withStatement("SELECT sealed FROM entries WHERE section = 'AccessToken' AND key = ?1") {
            try $0.bind(.text(key))
            XCTAssertTrue(try $0.step())
            return $0.blob(0)
        }
    }

    private func setSealed(_ raw: SQLiteConnection, key: String, to sealed: [UInt8]) throws {
        try raw.withStatement("UPDATE entries SET sealed = ?1 WHERE section = 'AccessToken' AND key = ?2") {
            try $0.bind(.blob(sealed), .text(key))
            try $0.step()
        }
    }
}

// MARK: File helpers (no Foundation)

func readFile(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { return result }
        result += chunk[0..<n]
    }
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    precondition(fd >= 0, "create \(path)")
    defer { close(fd) }
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        precondition(n > 0, "write \(path)")
        offset += n
    }
}

func fileMode(_ path: String) -> mode_t {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
}

func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let needle = Array(needle.utf8)
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains { start in
        haystack[start] == needle[0] && haystack[start..<(start + needle.count)].elementsEqual(needle)
    }
}

/// The test directories are flat: unlinking every entry and then the directory is enough.
func removeDirectory(_ path: String) {
    guard !path.isEmpty, let dir = opendir(path) else { return }
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { unlink("\(path)/\(name)") }
    }
    closedir(dir)
    rmdir(path)
}
