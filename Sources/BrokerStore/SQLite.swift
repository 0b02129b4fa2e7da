import CSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `SQLITE_TRANSIENT` is a macro (a cast of -1 to a function pointer) that Swift cannot import. It tells SQLite
/// to copy a bound value before the bind call returns, so Swift buffers only need to live for that call.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A failure reported by SQLite (or by the file operations around it).
///
/// Messages come from SQLite or from this module and never contain bound values, so a secret cannot leak
/// into a log through an error.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The extended result code (`SQLITE_NOTADB`, `SQLITE_IOERR_FSYNC`, …).
    public var code: Int32
    /// `sqlite3_errmsg`, or a description of the file operation that failed.
    public var message: String
    /// What we were doing, e.g. "prepare", "step", "open /path".
    public var operation: String
    /// `errno` of the underlying system call when SQLite knows it, else 0.
    public var systemErrno: Int32

    public init(code: Int32, message: String, operation: String, systemErrno: Int32 = 0) {
        self.code = code
        self.message = message
        self.operation = operation
        self.systemErrno = systemErrno
    }

    /// The primary result code (`SQLITE_IOERR` for `SQLITE_IOERR_FSYNC`).
    public var primaryCode: Int32 { code & 0xff }

    public var description: String {
        var text = "SQLite \(operation): \(message) (code \(code)"
        if let name = sqlite3_errstr(code) { text += ", \(String(cString: name))" }
        if systemErrno != 0 { text += ", errno \(systemErrno): \(String(cString: strerror(systemErrno)))" }
        return text + ")"
    }
}

/// One SQLite connection with a cache of prepared statements.
///
/// Opened with `SQLITE_OPEN_NOMUTEX` (multi-thread mode): SQLite's per-connection mutex would only protect
/// SQLite's own state, not the Swift statement cache, so callers must serialize all use of a connection
/// anyway (BrokerStore's rule: one actor owns it). With that rule in place the extra lock per call is waste.
final class SQLiteConnection {
    private(set) var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    /// The statement used last, found without hashing its text: a batch runs one statement for row after row, and
    /// hashing its 200 characters each time was 2 % of a large write.
    private var lastStatement: (sql: String, statement: OpaquePointer)?
    let path: String

    init(path: String, flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX) throws(SQLiteError) {
        self.path = path
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            // On failure SQLite usually still hands back a handle that carries the message and must be closed.
            let error = db.map { Self.error(from: $0, code: rc, operation: "open \(path)") }
                ?? SQLiteError(code: rc, message: "cannot allocate a connection", operation: "open \(path)")
            sqlite3_close_v2(db)
            throw error
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    /// Finalizes every statement and closes. An open transaction is rolled back by SQLite, as in a crash.
    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        lastStatement = nil
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    func setBusyTimeout(milliseconds: Int32) {
        if let handle { sqlite3_busy_timeout(handle, milliseconds) }
    }

    /// Runs SQL without parameters (DDL, PRAGMA, BEGIN/COMMIT). Never used with values that come from callers.
    func exec(_ sql: String) throws(SQLiteError) {
        let db = try open(operation: "exec")
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &message)
        guard rc == SQLITE_OK else {
            var error = Self.error(from: db, code: rc, operation: "exec \(Self.verb(sql))")
            if let message {
                error.message = String(cString: message)
                sqlite3_free(message)
            }
            throw error
        }
    }

    /// Whether no transaction is open (SQLite's autocommit mode).
    var isAutocommit: Bool { handle.map { sqlite3_get_autocommit($0) != 0 } ?? true }

    /// Runs `body` with the cached prepared statement for `sql`, then resets it and clears its bindings so
    /// that no statement keeps a read transaction open or holds on to a bound value between uses. Not
    /// re-entrant for the same SQL text (there is one statement per text).
    func withStatement<T>(_ sql: String, _ body: (SQLiteStatement) throws -> T) throws -> T {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement.pointer)
            sqlite3_clear_bindings(statement.pointer)
        }
        return try body(statement)
    }

    private func prepared(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        let db = try open(operation: "prepare")
        // The same literal compares by its storage, without reading its characters.
        if let lastStatement, lastStatement.sql == sql { return SQLiteStatement(pointer: lastStatement.statement, db: db) }
        if let cached = statements[sql] {
            lastStatement = (sql, cached)
            return SQLiteStatement(pointer: cached, db: db)
        }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw Self.error(from: db, code: rc, operation: "prepare \(Self.verb(sql))")
        }
        statements[sql] = statement
        lastStatement = (sql, statement)
        return SQLiteStatement(pointer: statement, db: db)
    }

    private func open(operation: String) throws(SQLiteError) -> OpaquePointer {
        guard let handle else {
            throw SQLiteError(code: SQLITE_MISUSE, message: "the database is closed", operation: operation)
        }
        return handle
    }

    static func error(from db: OpaquePointer, code: Int32, operation: String) -> SQLiteError {
        SQLiteError(code: code, message: String(cString: sqlite3_errmsg(db)), operation: operation,
                    systemErrno: sqlite3_system_errno(db))
    }

    /// The first words of a statement, enough to say which one failed without quoting a long text.
    private static func verb(_ sql: String) -> String {
        String(sql.split(separator: " ", maxSplits: 3).prefix(3).joined(separator: " "))
    }
}

/// A prepared statement borrowed from the connection's cache for the duration of `withStatement`.
struct SQLiteStatement {
    let pointer: OpaquePointer
    let db: OpaquePointer

    /// Binds parameters 1…n in order. Text and blobs are copied by SQLite (`SQLITE_TRANSIENT`).
    func bind(_ values: SQLiteValue...) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    func bind(_ value: SQLiteValue, at index: Int32) throws(SQLiteError) {
        let rc: Int32
        switch value {
        case .null:
            rc = sqlite3_bind_null(pointer, index)
        case .int64(let number):
            rc = sqlite3_bind_int64(pointer, index, number)
        case .text(let text):
            var text = text
            rc = text.withUTF8 { sqlite3_bind_text(pointer, index, $0.baseAddress, Int32($0.count), sqliteTransient) }
        case .blob(let bytes):
            // A nil pointer would bind NULL, not an empty blob: empty needs zeroblob(0).
            rc = bytes.isEmpty
                ? sqlite3_bind_zeroblob(pointer, index, 0)
                : bytes.withUnsafeBytes { sqlite3_bind_blob(pointer, index, $0.baseAddress, Int32($0.count), sqliteTransient) }
        }
        guard rc == SQLITE_OK else { throw SQLiteConnection.error(from: db, code: rc, operation: "bind") }
    }

    /// Advances one row: true if a row is available, false when done.
    @discardableResult
    func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(pointer)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw SQLiteConnection.error(from: db, code: rc, operation: "step")
        }
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(pointer, column) == SQLITE_NULL }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(pointer, column) }

    func text(_ column: Int32) -> String {
        // Pointer first, then length, as the SQLite docs prescribe (a later type conversion could move the text).
        guard let start = sqlite3_column_text(pointer, column) else { return "" }
        let count = Int(sqlite3_column_bytes(pointer, column))
        return String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    }

    /// The column's bytes without a copy; valid only inside `body` (SQLite owns them until the next step).
    func withBlob<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let start = sqlite3_column_blob(pointer, column)
        let count = Int(sqlite3_column_bytes(pointer, column))
        return try body(UnsafeRawBufferPointer(start: start, count: start == nil ? 0 : count))
    }

    func blob(_ column: Int32) -> [UInt8] {
        guard let start = sqlite3_column_blob(pointer, column) else { return [] }
        let count = Int(sqlite3_column_bytes(pointer, column))
        return Array(UnsafeRawBufferPointer(start: start, count: count))
    }
}

/// A value to bind to a statement parameter.
enum SQLiteValue {
    case null
    case int64(Int64)
    case text(String)
    case blob([UInt8])
}
