import BrokerPlatform
import CSQLite
import Crypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One cache entry as stored: its place (section, key), its non-secret JSON, and its secret in plaintext.
public struct StoredRow: Sendable, Equatable {
    /// "AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata", or another name (brokerd's own
    /// bookkeeping, unknown top-level sections).
    public var section: String
    /// The entry's key in its section (opaque here).
    public var key: String
    /// JSON text of the entry's non-secret fields, stored byte for byte and not interpreted.
    public var body: [UInt8]
    /// The entry's secret in plaintext (sealed at rest), nil if the entry has none.
    public var secret: [UInt8]?
    /// The account the row belongs to, as the caller names accounts (brokerd: the lowercased home account id), nil
    /// for rows of no account. Indexed, so that one account's rows can be read without the rest (`rows(ofAccount:)`).
    public var account: String?

    public init(section: String, key: String, body: [UInt8], secret: [UInt8]? = nil, account: String? = nil) {
        self.section = section
        self.key = key
        self.body = body
        self.secret = secret
        self.account = account
    }
}

/// The token cache in SQLite: one row per entry, each secret sealed with AES-256-GCM, every `apply` one
/// durable transaction whose cost grows with the change, not with the cache.
///
/// Threading: the connection is opened without SQLite's mutex and the statement cache is plain Swift state, so
/// a `CacheDatabase` must be used by one task at a time — in brokerd, only from the actor that owns it. It is
/// `Sendable` only so that it can be handed to that actor.
///
/// Files: `path` plus SQLite's `path-wal` and `path-shm`, all mode 0600. Secrets reach SQLite only sealed,
/// so no plaintext secret is ever in any of them; bodies are stored as given.
public final class CacheDatabase: @unchecked Sendable {
    public struct Loaded: Sendable {
        public var rows: [StoredRow]
        /// One line per row that could not be used (section and key, never the secret).
        public var problems: [String]

        public init(rows: [StoredRow] = [], problems: [String] = []) {
            self.rows = rows
            self.problems = problems
        }
    }

    public enum Failure: Error, CustomStringConvertible {
        /// The key check does not open with this key: the file belongs to another key (or was tampered with).
        case wrongKey(path: String)
        /// The file is not SQLite, is corrupt, or is SQLite but not a cache this version can read.
        case notADatabase(path: String, detail: String)
        /// A brokerd cache of a schema this version does not know (a newer brokerd wrote it).
        case otherVersion(path: String, schema: Int64)
        case sqlite(SQLiteError)
        /// A write to a database opened with `readOnlySnapshotOf`.
        case readOnly(path: String)

        public var description: String {
            switch self {
            case .wrongKey(let path):
                return "cache database \(path) was written with another key: its contents cannot be decrypted"
            case .notADatabase(let path, let detail):
                return "\(path) is not a usable cache database: \(detail)"
            case .otherVersion(let path, let schema):
                return "cache database \(path) is of schema version \(schema), written by another brokerd version"
            case .sqlite(let error):
                return error.description
            case .readOnly(let path):
                return "cache database \(path) is open read-only (its directory could not be written)"
            }
        }
    }

    public let path: String
    /// Seals and opens the secrets under the database's key.
    let sealer: RowSealer
    private let connection: SQLiteConnection
    /// Opened with `readOnlySnapshotOf`: every write is refused.
    public private(set) var isReadOnly = false
    /// The account of a row written by a version without the `account` column (schema 1), for the one-time upgrade.
    public typealias AccountOfRow = (_ section: String, _ body: [UInt8]) -> String?

    /// 1: entries(section, key, body, sealed); 2: plus `account` and its index.
    static let schemaVersion: Int64 = 2
    /// Milliseconds to wait for another connection's lock (a second brokerd, an admin's sqlite3 shell).
    static let busyTimeout: Int32 = 5_000
    /// After a big import the WAL is truncated back to this size at the next checkpoint instead of staying
    /// as large as the import.
    static let walSizeLimit = 8 * 1024 * 1024
    static let pageSize = 16_384

    /// Opens (creating it if needed) the database at `path`; a schema-1 file is upgraded in place, each row's
    /// account given by `accountOfRow`.
    public init(path: String, key: SymmetricKey, accountOfRow: AccountOfRow = { _, _ in nil }) throws {
        // The cipher is part of the on-disk format; a shorter key would silently write a weaker cache.
        precondition(key.bitCount == 256, "CacheDatabase needs a 256-bit key")
        self.path = path
        sealer = RowSealer(key: key)
        try Self.prepareFile(path)
        do {
            connection = try SQLiteConnection(path: path)
        } catch {
            throw Failure.sqlite(error)
        }
        do {
            try configure()
            try ensureSchema(accountOfRow: accountOfRow)
        } catch {
            connection.close()
            throw Self.classify(error, path: path)
        }
    }

    /// Opens the database at `path` for reading only, as the immutable file it is while its directory cannot be
    /// written (a read-only mount): no locks, no WAL, no schema change. Only for a file that has no write-ahead log
    /// beside it: one would hold commits this view cannot see. `apply` on it throws `readOnly`.
    public init(readOnlySnapshotOf path: String, key: SymmetricKey) throws {
        precondition(key.bitCount == 256, "CacheDatabase needs a 256-bit key")
        self.path = path
        sealer = RowSealer(key: key)
        if let size = Self.fileSize(path + "-wal"), size > 0 {
            throw Failure.notADatabase(path: path, detail: "it cannot be opened for writing and its write-ahead log holds commits")
        }
        // RFC 3986 escapes for the characters a file: URI gives a meaning to; everything else is taken as it is.
        var escaped = ""
        for character in path {
            switch character {
            case "%": escaped += "%25"
            case "?": escaped += "%3F"
            case "#": escaped += "%23"
            default: escaped.append(character)
            }
        }
        do {
            connection = try SQLiteConnection(path: "file:\(escaped)?mode=ro&immutable=1",
                                              flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX)
        } catch {
            throw Failure.sqlite(error)
        }
        isReadOnly = true
        do {
            let version = try userVersion()
            guard version == Self.schemaVersion else {
                throw Failure.notADatabase(path: path, detail: "schema version \(version) needs an upgrade, which a read-only file cannot get")
            }
            try checkKey()
        } catch {
            connection.close()
            throw Self.classify(error, path: path)
        }
    }

    deinit { connection.close() }

    /// Closes the connection; SQLite checkpoints and removes the WAL if no other connection is open.
    /// Later calls throw.
    public func close() { connection.close() }

    // MARK: Reading and writing

    /// Every row, secrets opened. A row whose secret does not open (tampered with, or moved from another row)
    /// is left out and named in `problems`; the others load.
    public func loadAll() throws -> Loaded {
        var rows: [StoredRow] = []
        let problems = try forEachRow { rows.append($0) }
        return Loaded(rows: rows, problems: problems)
    }

    /// Every row in turn, secrets opened, without holding them all (a row is handed over and may go before the
    /// next is read: a large cache then loads without a second copy of itself). Returns the problems, as
    /// `loadAll` names them.
    public func forEachRow(_ body: (StoredRow) throws -> Void) throws -> [String] {
        try eachRow("SELECT section, key, body, sealed, account FROM entries", body)
    }

    /// Every row whose rowid is in `rowids`, as `forEachRow` gives them: one part of a load made in parts, each on
    /// a connection of its own (`rowidBounds` gives the whole range).
    public func forEachRow(rowids: ClosedRange<Int64>, _ body: (StoredRow) throws -> Void) throws -> [String] {
        try eachRow("SELECT section, key, body, sealed, account FROM entries WHERE rowid BETWEEN ?1 AND ?2",
                    binding: [.int64(rowids.lowerBound), .int64(rowids.upperBound)], body)
    }

    /// The lowest and highest rowid, nil when there is no row. Asked as two queries in one: SQLite reads a lone
    /// `min()` or `max()` from one end of the b-tree, but `min(rowid), max(rowid)` together from every row (a
    /// fortieth of a load of 100,000 tokens, before its reading could start).
    public func rowidBounds() throws -> ClosedRange<Int64>? {
        do {
            return try connection.withStatement(
                "SELECT (SELECT min(rowid) FROM entries), (SELECT max(rowid) FROM entries)") { statement in
                guard try statement.step(), !statement.isNull(0) else { return nil }
                return statement.int64(0)...statement.int64(1)
            }
        } catch let error as SQLiteError {
            throw Failure.sqlite(error)
        }
    }

    /// Rows per section: what a full load is about to read, so that it can size its tables once (the primary
    /// key's index answers this without reading a row).
    public func sectionCounts() throws -> [String: Int] {
        var counts: [String: Int] = [:]
        do {
            try connection.withStatement("SELECT section, COUNT(*) FROM entries GROUP BY section") { statement in
                while try statement.step() { counts[statement.text(0)] = Int(statement.int64(1)) }
            }
        } catch let error as SQLiteError {
            throw Failure.sqlite(error)
        }
        return counts
    }

    /// The rows of one account (`StoredRow.account`), as `loadAll` gives them: a lookup in the account index.
    public func rows(ofAccount account: String) throws -> Loaded {
        var rows: [StoredRow] = []
        let problems = try eachRow("SELECT section, key, body, sealed, account FROM entries WHERE account = ?1",
                                   binding: [.text(account)]) { rows.append($0) }
        return Loaded(rows: rows, problems: problems)
    }

    /// The rows of one section, as `loadAll` gives them.
    public func rows(inSection section: String) throws -> Loaded {
        var rows: [StoredRow] = []
        let problems = try eachRow("SELECT section, key, body, sealed, account FROM entries WHERE section = ?1",
                                   binding: [.text(section)]) { rows.append($0) }
        return Loaded(rows: rows, problems: problems)
    }

    private func eachRow(_ sql: String, binding values: [SQLiteValue] = [], _ body: (StoredRow) throws -> Void) throws -> [String] {
        var problems: [String] = []
        do {
            try connection.withStatement(sql) { statement in
                for (offset, value) in values.enumerated() { try statement.bind(value, at: Int32(offset + 1)) }
                while try statement.step() {
                    let section = statement.text(0), key = statement.text(1)
                    var row = StoredRow(section: section, key: key, body: statement.blob(2),
                                        account: statement.isNull(4) ? nil : statement.text(4))
                    if !statement.isNull(3) {
                        let secret = statement.withBlob(3) { try? sealer.open($0, section: section, key: key) }
                        guard let secret else {
                            problems.append(
                                "\(section) entry \"\(key)\": its secret cannot be decrypted (tampered with or sealed for another entry); skipped")
                            continue
                        }
                        row.secret = secret
                    }
                    try body(row)
                }
            }
        } catch let error as SQLiteError {
            throw Failure.sqlite(error)
        }
        return problems
    }

    /// Applies all changes in one transaction, durable when this returns. On any error the transaction is
    /// rolled back and the error thrown: either every change is stored or none is.
    public func apply(_ changes: [RowChange]) throws {
        guard !changes.isEmpty else { return }
        if isReadOnly { throw Failure.readOnly(path: path) }
        let sealed = try sealer.seal(changes)
        do {
            try connection.exec("BEGIN IMMEDIATE")
            do {
                for offset in RowChange.keyOrder(changes) { try write(changes[offset], sealedSecret: sealed[offset]) }
                try connection.exec("COMMIT")
            } catch {
                // A failed COMMIT or an I/O error may already have ended the transaction.
                if !connection.isAutocommit { try? connection.exec("ROLLBACK") }
                throw error
            }
        } catch let error as SQLiteError {
            throw Failure.sqlite(error)
        }
    }

    private func write(_ change: RowChange, sealedSecret: [UInt8]?) throws {
        switch change {
        case .put(let row):
            let sealed: SQLiteValue = sealedSecret.map(SQLiteValue.blob) ?? .null
            // An upsert rather than INSERT OR REPLACE: it updates in place instead of deleting and reinserting.
            try connection.withStatement("""
                INSERT INTO entries(section, key, body, sealed, account) VALUES(?1, ?2, ?3, ?4, ?5)
                ON CONFLICT(section, key) DO UPDATE SET body = excluded.body, sealed = excluded.sealed,
                                                        account = excluded.account
                """) { statement in
                try statement.bind(.text(row.section), .text(row.key), .blob(row.body), sealed,
                                   row.account.map(SQLiteValue.text) ?? .null)
                try statement.step()
            }
        case .delete(let section, let key):
            try connection.withStatement("DELETE FROM entries WHERE section = ?1 AND key = ?2") { statement in
                try statement.bind(.text(section), .text(key))
                try statement.step()
            }
        case .deleteAll:
            try connection.withStatement("DELETE FROM entries") { statement in _ = try statement.step() }
        }
    }

    // MARK: Opening

    /// A fixed plaintext sealed under the key at creation: opening it proves the key before any entry is read.
    private static let keyCheckPlaintext = Array("brokerd cache key check".utf8)
    private static let keyCheckName = "key-check"

    private func configure() throws {
        connection.setBusyTimeout(milliseconds: Self.busyTimeout)
        // Reading the header first: on a file that is not SQLite this is where SQLITE_NOTADB surfaces.
        _ = try userVersion()
        // Rows are ~2 KB (a 1.5 KB token sealed, plus its JSON): 4 KB pages hold one row each and waste half the
        // file. 16 KB pages measured smallest and fastest to import and load. Only takes effect on a new file.
        try connection.exec("PRAGMA page_size = \(Self.pageSize)")
        // WAL: a commit is one append and one fsync of the WAL, not a rewrite of the pages in place.
        try connection.exec("PRAGMA journal_mode = WAL")
        // FULL: the WAL is fsynced at every commit, so a returned `apply` survives a power cut.
        try connection.exec("PRAGMA synchronous = FULL")
        try connection.exec("PRAGMA foreign_keys = OFF")
        try connection.exec("PRAGMA journal_size_limit = \(Self.walSizeLimit)")
        // The write-ahead log is folded into the database by `checkpoint`, which the writer calls once it has caught
        // up: inside a commit, SQLite's own checkpoint made that commit's waiter wait for it (the last of a large
        // import's writes). This is only the backstop for a writer that never catches up.
        try connection.exec("PRAGMA wal_autocheckpoint = \(Self.checkpointBackstopPages)")
    }

    /// 512 MiB of 16 KiB pages.
    static let checkpointBackstopPages = 32_768

    /// Copies what the write-ahead log holds into the database, as far as readers allow (SQLite's PASSIVE mode).
    public func checkpoint() throws {
        if isReadOnly { return }
        do {
            try connection.exec("PRAGMA wal_checkpoint(PASSIVE)")
        } catch {
            throw Failure.sqlite(error)
        }
    }

    private func userVersion() throws -> Int64 {
        try connection.withStatement("PRAGMA user_version") { statement in
            try statement.step()
            return statement.int64(0)
        }
    }

    private func ensureSchema(accountOfRow: AccountOfRow) throws {
        var version = try userVersion()
        if version == 0 {
            try createSchema()
            version = try userVersion()
        }
        guard version == 1 || version == Self.schemaVersion else {
            throw Failure.otherVersion(path: path, schema: version)
        }
        try checkKey()  // before an upgrade: a file of another key is moved aside as it was
        if version == 1 { try addAccountColumn(accountOfRow) }
    }

    /// Creates the tables and the key check in one transaction, so that a crash leaves either an empty file
    /// or a complete cache. Re-checks under the write lock in case another process created it meanwhile.
    private func createSchema() throws {
        try connection.exec("BEGIN IMMEDIATE")
        do {
            if try userVersion() == 0 {
                let objects = try connection.withStatement("SELECT count(*) FROM sqlite_schema") { statement in
                    try statement.step()
                    return statement.int64(0)
                }
                guard objects == 0 else {
                    throw Failure.notADatabase(path: path, detail: "an SQLite database, but not a brokerd cache")
                }
                try connection.exec("""
                    CREATE TABLE entries(section TEXT NOT NULL, key TEXT NOT NULL, body BLOB NOT NULL, sealed BLOB,
                                         account TEXT, PRIMARY KEY(section, key));
                    \(Self.accountIndex);
                    CREATE TABLE meta(name TEXT PRIMARY KEY, value BLOB);
                    PRAGMA user_version = \(Self.schemaVersion);
                    """)
                let check = try sealer.seal(Self.keyCheckPlaintext, section: "meta", key: Self.keyCheckName)
                try connection.withStatement("INSERT INTO meta(name, value) VALUES(?1, ?2)") { statement in
                    try statement.bind(.text(Self.keyCheckName), .blob(check))
                    try statement.step()
                }
            }
            try connection.exec("COMMIT")
        } catch {
            if !connection.isAutocommit { try? connection.exec("ROLLBACK") }
            throw error
        }
    }

    static let accountIndex = "CREATE INDEX entries_by_account ON entries(account) WHERE account IS NOT NULL"

    /// Schema 1 → 2, in one transaction: the `account` column, filled from each row's body, and its index.
    /// The rows are read first and updated after, so that no update runs under an open scan of the same table.
    private func addAccountColumn(_ accountOfRow: AccountOfRow) throws {
        try connection.exec("BEGIN IMMEDIATE")
        do {
            if try userVersion() == 1 {
                try connection.exec("ALTER TABLE entries ADD COLUMN account TEXT")
                var accounts: [(rowid: Int64, account: String)] = []
                try connection.withStatement("SELECT rowid, section, body FROM entries") { statement in
                    while try statement.step() {
                        if let account = accountOfRow(statement.text(1), statement.blob(2)) {
                            accounts.append((statement.int64(0), account))
                        }
                    }
                }
                for (rowid, account) in accounts {
                    try connection.withStatement("UPDATE entries SET account = ?2 WHERE rowid = ?1") { statement in
                        try statement.bind(.int64(rowid), .text(account))
                        try statement.step()
                    }
                }
                try connection.exec("\(Self.accountIndex); PRAGMA user_version = 2")
            }
            try connection.exec("COMMIT")
        } catch {
            if !connection.isAutocommit { try? connection.exec("ROLLBACK") }
            throw error
        }
    }

    private func checkKey() throws {
        let check = try connection.withStatement("SELECT value FROM meta WHERE name = ?1") { statement -> [UInt8]? in
            try statement.bind(.text(Self.keyCheckName))
            return try statement.step() && !statement.isNull(0) ? statement.blob(0) : nil
        }
        guard let check else {
            throw Failure.notADatabase(path: path, detail: "the key check row is missing")
        }
        guard let plaintext = try? check.withUnsafeBytes({ try sealer.open($0, section: "meta", key: Self.keyCheckName) }),
              plaintext == Self.keyCheckPlaintext else {
            throw Failure.wrongKey(path: path)
        }
    }

    /// Maps what went wrong while opening to the caller's choices: a foreign or corrupt file is
    /// `.notADatabase` (move it aside), anything else (I/O, locks) is `.sqlite` (retry or report).
    private static func classify(_ error: Error, path: String) -> Error {
        switch error {
        case let failure as Failure:
            return failure
        case let error as SQLiteError where error.primaryCode == SQLITE_NOTADB || error.primaryCode == SQLITE_CORRUPT:
            return Failure.notADatabase(path: path, detail: error.message)
        case let error as SQLiteError:
            return Failure.sqlite(error)
        default:
            return error
        }
    }
}

// MARK: Files

extension CacheDatabase {
    /// SQLite's companion files, which belong to the database and must move and disappear with it.
    public static let companionSuffixes = ["-wal", "-shm"]

    /// Renames the database and its companions to `<path>.<reason>-<unix time>` (plus `-wal`/`-shm`) and returns
    /// the new path, which SQLite can open as it was. Call it with no connection open on `path`.
    public static func moveAside(_ path: String, reason: String) throws -> String {
        do {
            return try AtomicFile.moveAside(path, reason: reason, companions: companionSuffixes)
        } catch {
            throw ioFailure(error.operation, path: error.path, errno: error.code)
        }
    }

    /// Creates the database file with mode 0600 before SQLite sees it, because SQLite creates files 0644 (less
    /// the umask) and gives `-wal`/`-shm` the mode of the database file.
    static func prepareFile(_ path: String) throws {
        if exists(path) {
            // A copy restored with looser permissions would otherwise pass them on to new WAL files.
            for file in [path] + companionSuffixes.map({ path + $0 }) where exists(file) {
                var info = stat()
                if stat(file, &info) == 0, info.st_mode & 0o077 != 0, chmod(file, 0o600) != 0 {
                    throw ioFailure("chmod 600", path: file, errno: errno)
                }
            }
            return
        }
        // A stale `-wal` left next to a deleted database is harmless: SQLite deletes a WAL found next to an
        // empty database file instead of replaying it (tested).
        let fd = systemOpen(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd < 0 {
            if errno == EEXIST { return }   // created by a concurrent opener: just use it
            throw ioFailure("create", path: path, errno: errno)
        }
        systemClose(fd)
        try syncDirectory(of: path)
    }

    /// Makes a creation or rename durable: the directory entry is what a crash would otherwise lose.
    static func syncDirectory(of path: String) throws {
        do { try AtomicFile.syncDirectory(AtomicFile.parentDirectory(of: path)) } catch {
            throw ioFailure(error.operation, path: error.path, errno: error.code)
        }
    }

    static func fileSize(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    static func exists(_ path: String) -> Bool { AtomicFile.exists(path) }

    /// File errors around the database are reported as SQLite I/O errors, so `Failure` stays the one type
    /// callers handle.
    static func ioFailure(_ operation: String, path: String, errno code: Int32) -> Failure {
        let primary = code == ENOENT || code == EACCES ? SQLITE_CANTOPEN : SQLITE_IOERR
        return .sqlite(SQLiteError(code: primary, message: String(cString: strerror(code)),
                                   operation: "\(operation) \(path)", systemErrno: code))
    }
}

// Outside the class, where `open`/`close` name the system calls and not CacheDatabase's methods.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func systemClose(_ fd: Int32) { close(fd) }
