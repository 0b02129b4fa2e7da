import CSQLite

#if canImport(Glibc)
import Glibc
#endif

/// One line of the audit: a token handed out, refused or failed (`count` equal requests between `time` and
/// `lastTime` when repeated hits were counted together). Never a token or a secret.
public struct AuditRow: Sendable, Equatable {
    public var time: Int64
    public var lastTime: Int64
    public var count: Int
    /// `socket` or `dbus`.
    public var frontEnd: String
    /// The caller as `flatpak:ID`, `snap:NAME`, `exe:PATH`.
    public var app: String
    public var pid: Int32
    public var executable: String?
    public var clientId: String
    /// Space-separated, as requested.
    public var scopes: String
    public var homeAccountId: String?
    public var username: String?
    /// `cache`, `refresh`, `interactive`, `refused`, or the error's code word.
    public var outcome: String
    /// Why a call was refused or failed (a sentence without secrets).
    public var detail: String?

    public init(time: Int64, lastTime: Int64? = nil, count: Int = 1, frontEnd: String, app: String, pid: Int32,
                executable: String?, clientId: String, scopes: String, homeAccountId: String?, username: String?,
                outcome: String, detail: String? = nil) {
        self.time = time
        self.lastTime = lastTime ?? time
        self.count = count
        self.frontEnd = frontEnd
        self.app = app
        self.pid = pid
        self.executable = executable
        self.clientId = clientId
        self.scopes = scopes
        self.homeAccountId = homeAccountId
        self.username = username
        self.outcome = outcome
        self.detail = detail
    }
}

/// A grant or denial as stored: lists are space-separated.
public struct GrantRow: Sendable, Equatable {
    public var app: String
    public var clientId: String
    public var allowed: Bool
    public var accounts: [String]
    public var scopes: [String]
    public var since: Int64

    public init(app: String, clientId: String, allowed: Bool, accounts: [String], scopes: [String], since: Int64) {
        self.app = app
        self.clientId = clientId
        self.allowed = allowed
        self.accounts = accounts
        self.scopes = scopes
        self.since = since
    }
}

/// An app brokerd has seen, and the client IDs it used.
public struct SeenAppRow: Sendable, Equatable {
    public var app: String
    public var kind: String
    public var executable: String?
    public var unit: String?
    public var firstSeen: Int64
    public var lastSeen: Int64
    public var clientIds: [String]

    public init(app: String, kind: String, executable: String?, unit: String?, firstSeen: Int64, lastSeen: Int64,
                clientIds: [String]) {
        self.app = app
        self.kind = kind
        self.executable = executable
        self.unit = unit
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.clientIds = clientIds
    }
}

public struct AuditFilter: Sendable, Equatable {
    public var app: String?
    public var clientId: String?
    /// A home account ID or a username (case-insensitive).
    public var account: String?
    /// Unix seconds: rows whose last request is at or after this.
    public var since: Int64?
    public var limit: Int

    public init(app: String? = nil, clientId: String? = nil, account: String? = nil, since: Int64? = nil, limit: Int = 100) {
        self.app = app
        self.clientId = clientId
        self.account = account
        self.since = since
        self.limit = limit
    }
}

/// Who may have which tokens, and who had them: the apps brokerd has seen, the user's grants and denials, and the
/// audit. A database of its own beside the cache (`apps.db`), not encrypted: it holds no secret, only names.
/// Like CacheDatabase, used by one owner at a time (brokerd: the AppAccess actor's store).
public final class AppDatabase: @unchecked Sendable {
    private let connection: SQLiteConnection
    public let path: String

    /// `path` ":memory:" keeps it in memory (the `memory` key store: nothing on disk).
    public init(path: String) throws(SQLiteError) {
        self.path = path
        if path != ":memory:" {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if fd >= 0 { Glibc.close(fd) }
        }
        connection = try SQLiteConnection(path: path)
        connection.setBusyTimeout(milliseconds: 5_000)
        // The audit is written in batches every second; a power cut may lose the last batch, never the database.
        try connection.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
        try connection.exec("""
            CREATE TABLE IF NOT EXISTS grants (app TEXT NOT NULL, client_id TEXT NOT NULL, allowed INTEGER NOT NULL,
                accounts TEXT NOT NULL, scopes TEXT NOT NULL, since INTEGER NOT NULL, PRIMARY KEY (app, client_id));
            CREATE TABLE IF NOT EXISTS apps (app TEXT PRIMARY KEY, kind TEXT NOT NULL, executable TEXT, unit TEXT,
                first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS app_clients (app TEXT NOT NULL, client_id TEXT NOT NULL, first_seen INTEGER NOT NULL,
                last_seen INTEGER NOT NULL, PRIMARY KEY (app, client_id));
            CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY, time INTEGER NOT NULL, last_time INTEGER NOT NULL,
                count INTEGER NOT NULL, front_end TEXT NOT NULL, app TEXT NOT NULL, pid INTEGER NOT NULL, executable TEXT,
                client_id TEXT NOT NULL, scopes TEXT NOT NULL, account TEXT, username TEXT, outcome TEXT NOT NULL, detail TEXT);
            CREATE INDEX IF NOT EXISTS audit_by_app ON audit (app, id);
            CREATE INDEX IF NOT EXISTS audit_by_client ON audit (client_id, id);
            CREATE INDEX IF NOT EXISTS audit_by_account ON audit (account COLLATE NOCASE, id);
            CREATE INDEX IF NOT EXISTS audit_by_username ON audit (username COLLATE NOCASE, id);
            CREATE INDEX IF NOT EXISTS audit_by_time ON audit (last_time);
            """)
    }

    public func close() { connection.close() }

    // MARK: Grants

    public func grants() throws -> [GrantRow] {
        try connection.withStatement("SELECT app, client_id, allowed, accounts, scopes, since FROM grants ORDER BY app, client_id") { s in
            var rows: [GrantRow] = []
            while try s.step() {
                rows.append(GrantRow(app: s.text(0), clientId: s.text(1), allowed: s.int64(2) != 0,
                                     accounts: Self.list(s.text(3)), scopes: Self.list(s.text(4)), since: s.int64(5)))
            }
            return rows
        }
    }

    public func setGrant(_ grant: GrantRow) throws {
        try connection.withStatement("""
            INSERT INTO grants (app, client_id, allowed, accounts, scopes, since) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (app, client_id) DO UPDATE SET allowed = excluded.allowed, accounts = excluded.accounts,
                scopes = excluded.scopes, since = excluded.since
            """) { s in
            try s.bind(.text(grant.app), .text(grant.clientId), .int64(grant.allowed ? 1 : 0),
                       .text(grant.accounts.joined(separator: " ")), .text(grant.scopes.joined(separator: " ")), .int64(grant.since))
            try s.step()
        }
    }

    /// Removes the grants of `app` (for one client ID, or all); how many went.
    public func removeGrants(app: String, clientId: String?) throws -> Int {
        try connection.withStatement("DELETE FROM grants WHERE app = ? AND (?2 IS NULL OR client_id = ?2)") { s in
            try s.bind(.text(app), clientId.map(SQLiteValue.text) ?? .null)
            try s.step()
            return Int(sqlite3_changes(s.db))
        }
    }

    // MARK: The audit and the apps seen

    /// Appends audit rows and notes the apps and client IDs they name, in one transaction.
    public func append(_ rows: [AuditRow], apps: [SeenAppRow]) throws {
        guard !rows.isEmpty || !apps.isEmpty else { return }
        try connection.exec("BEGIN IMMEDIATE")
        do {
            try connection.withStatement("""
                INSERT INTO audit (time, last_time, count, front_end, app, pid, executable, client_id, scopes, account,
                    username, outcome, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """) { s in
                for row in rows {
                    try s.bind(.int64(row.time), .int64(row.lastTime), .int64(Int64(row.count)), .text(row.frontEnd),
                               .text(row.app), .int64(Int64(row.pid)), Self.value(row.executable), .text(row.clientId),
                               .text(row.scopes), Self.value(row.homeAccountId), Self.value(row.username),
                               .text(row.outcome), Self.value(row.detail))
                    try s.step()
                    sqlite3_reset(s.pointer)
                }
            }
            for app in apps {
                try connection.withStatement("""
                    INSERT INTO apps (app, kind, executable, unit, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (app) DO UPDATE SET executable = excluded.executable, unit = excluded.unit,
                        last_seen = max(last_seen, excluded.last_seen)
                    """) { s in
                    try s.bind(.text(app.app), .text(app.kind), Self.value(app.executable), Self.value(app.unit),
                               .int64(app.firstSeen), .int64(app.lastSeen))
                    try s.step()
                }
                for clientId in app.clientIds {
                    try connection.withStatement("""
                        INSERT INTO app_clients (app, client_id, first_seen, last_seen) VALUES (?, ?, ?, ?)
                        ON CONFLICT (app, client_id) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen)
                        """) { s in
                        try s.bind(.text(app.app), .text(clientId), .int64(app.firstSeen), .int64(app.lastSeen))
                        try s.step()
                    }
                }
            }
            try connection.exec("COMMIT")
        } catch {
            try? connection.exec("ROLLBACK")
            throw error
        }
    }

    /// Deletes audit rows older than `before` (Unix seconds), and the oldest past `maximumRows`; how many went.
    public func prune(before: Int64, maximumRows: Int) throws -> Int {
        var removed = try connection.withStatement("DELETE FROM audit WHERE last_time < ?") { s in
            try s.bind(.int64(before))
            try s.step()
            return Int(sqlite3_changes(s.db))
        }
        removed += try connection.withStatement("DELETE FROM audit WHERE id <= (SELECT max(id) FROM audit) - ?") { s in
            try s.bind(.int64(Int64(maximumRows)))
            try s.step()
            return Int(sqlite3_changes(s.db))
        }
        return removed
    }

    public func auditRowCount() throws -> Int {
        try connection.withStatement("SELECT count(*) FROM audit") { s in
            try s.step()
            return Int(s.int64(0))
        }
    }

    /// The newest rows that pass the filter, newest first. Each filter has an index on (field, id), so a filter
    /// walks its own rows backwards from the newest and stops at `limit`, at any audit size.
    public func audit(_ filter: AuditFilter) throws -> [AuditRow] {
        var conditions: [String] = [], values: [SQLiteValue] = []
        if let app = filter.app {
            conditions.append("app = ?")
            values.append(.text(app))
        }
        if let clientId = filter.clientId {
            conditions.append("client_id = ?")
            values.append(.text(clientId))
        }
        if let account = filter.account {
            conditions.append("(account = ? COLLATE NOCASE OR username = ? COLLATE NOCASE)")
            values += [.text(account), .text(account)]
        }
        if let since = filter.since {
            conditions.append("last_time >= ?")
            values.append(.int64(since))
        }
        let sql = """
            SELECT time, last_time, count, front_end, app, pid, executable, client_id, scopes, account, username, outcome,
                detail FROM audit \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                ORDER BY id DESC LIMIT ?
            """
        values.append(.int64(Int64(max(0, filter.limit))))
        return try connection.withStatement(sql) { s in
            for (index, value) in values.enumerated() { try s.bind(value, at: Int32(index + 1)) }
            var rows: [AuditRow] = []
            while try s.step() {
                rows.append(AuditRow(time: s.int64(0), lastTime: s.int64(1), count: Int(s.int64(2)), frontEnd: s.text(3),
                                     app: s.text(4), pid: Int32(truncatingIfNeeded: s.int64(5)), executable: Self.text(s, 6),
                                     clientId: s.text(7), scopes: s.text(8), homeAccountId: Self.text(s, 9),
                                     username: Self.text(s, 10), outcome: s.text(11), detail: Self.text(s, 12)))
            }
            return rows
        }
    }

    public func apps() throws -> [SeenAppRow] {
        var clients: [String: [String]] = [:]
        try connection.withStatement("SELECT app, client_id FROM app_clients ORDER BY app, client_id") { s in
            while try s.step() { clients[s.text(0), default: []].append(s.text(1)) }
        }
        return try connection.withStatement("SELECT app, kind, executable, unit, first_seen, last_seen FROM apps ORDER BY app") { s in
            var rows: [SeenAppRow] = []
            while try s.step() {
                let app = s.text(0)
                rows.append(SeenAppRow(app: app, kind: s.text(1), executable: Self.text(s, 2), unit: Self.text(s, 3),
                                       firstSeen: s.int64(4), lastSeen: s.int64(5), clientIds: clients[app] ?? []))
            }
            return rows
        }
    }

    private static func value(_ text: String?) -> SQLiteValue { text.map(SQLiteValue.text) ?? .null }
    private static func text(_ s: SQLiteStatement, _ column: Int32) -> String? { s.isNull(column) ? nil : s.text(column) }
    private static func list(_ text: String) -> [String] { text.split(separator: " ").map(String.init) }
}
