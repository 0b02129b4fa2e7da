import BrokerJSON

// importCache and exportCache: the MSAL cache document in and out.

public struct ImportCacheParams: Codable, Sendable {
    /// Only `"msal"` (the unified cache schema) for now.
    public var format: String
    /// The cache document as JSON text (the content of e.g. `~/.azure/msal_token_cache.json`); the whole message
    /// must stay under the 1 MiB limit. Exactly one of `data` and `path`.
    public var data: String?
    /// An absolute path of a file of the caller's user that brokerd reads itself: any size (since protocol 1.3).
    public var path: String?
    public init(format: String = "msal", data: String? = nil, path: String? = nil) {
        self.format = format
        self.data = data
        self.path = path
    }
}

public struct ExportCacheParams: Codable, Sendable {
    public var format: String?
    /// An absolute path brokerd writes the document to itself (0600, replaced atomically; the directory must belong
    /// to the caller's user or be sticky, like /tmp): any size (since protocol 1.3). Without it, the document comes
    /// back in `data`.
    public var path: String?
    public init(format: String? = "msal", path: String? = nil) {
        self.format = format
        self.path = path
    }
}

public struct ImportResult: Codable, Sendable, Equatable {
    public var added: Int
    public var replaced: Int
    public var keptNewer: Int
    public var accounts: Int
    public init(added: Int, replaced: Int, keptNewer: Int, accounts: Int) {
        self.added = added
        self.replaced = replaced
        self.keptNewer = keptNewer
        self.accounts = accounts
    }
}

public struct ExportResult: Codable, Sendable, Equatable {
    public var format: String
    /// The document, when no `path` was given.
    public var data: String?
    /// Where it was written, and how many bytes, when a `path` was given.
    public var path: String?
    public var bytes: Int?
    public init(format: String, data: String? = nil, path: String? = nil, bytes: Int? = nil) {
        self.format = format
        self.data = data
        self.path = path
        self.bytes = bytes
    }
}

/// `recoverCaches` (since protocol 1.8): try the databases waiting for their keys again, with the key store's key
/// read afresh and, when given, a key the user holds.
public struct RecoverCachesParams: Codable, Sendable, Equatable {
    /// A 256-bit key, base64url without padding (a key file's 32 bytes), to try besides the key store's.
    public var key: String?
    /// A database file to wait for first (one given up with `resetWaitingCaches`, or copied from elsewhere).
    public var database: String?
    public init(key: String? = nil, database: String? = nil) {
        self.key = key
        self.database = database
    }
}

public struct RecoverCachesResult: Codable, Sendable, Equatable {
    public var merged: [MergedCache]
    /// Databases still waiting for their keys.
    public var waiting: [String]
    /// What stood in the way (a key store that cannot be read, a database that cannot be read).
    public var problems: [String]
    public init(merged: [MergedCache], waiting: [String], problems: [String]) {
        self.merged = merged
        self.waiting = waiting
        self.problems = problems
    }
}

/// One waiting database merged into the cache in use, as an import reports it.
public struct MergedCache: Codable, Sendable, Equatable {
    public var file: String
    public var added: Int
    public var replaced: Int
    public var keptNewer: Int
    public init(file: String, added: Int, replaced: Int, keptNewer: Int) {
        self.file = file
        self.added = added
        self.replaced = replaced
        self.keptNewer = keptNewer
    }
}

/// `resetWaitingCaches` (since protocol 1.8): the waiting databases are given up, each kept as a file that
/// `recoverCaches` can still open (`database` and `key`).
public struct ResetWaitingCachesResult: Codable, Sendable, Equatable {
    public var keptAs: [String]
    public init(keptAs: [String]) { self.keptAs = keptAs }
}

/// `backupCache` (since protocol 1.8): the whole cache written to `path` sealed under `passphrase` (scrypt, then
/// AES-256-GCM); never in the clear. `restoreCache` takes the same params and merges it back as an import does.
public struct BackupCacheParams: Codable, Sendable, Equatable {
    /// An absolute path brokerd writes (0600, replaced atomically) or reads itself, as `exportCache` and `importCache`.
    public var path: String
    /// At least 8 characters. Never logged.
    public var passphrase: String
    public init(path: String, passphrase: String) {
        self.path = path
        self.passphrase = passphrase
    }
}

public struct BackupCacheResult: Codable, Sendable, Equatable {
    public var path: String
    public var bytes: Int
    public var accounts: Int
    public init(path: String, bytes: Int, accounts: Int) {
        self.path = path
        self.bytes = bytes
        self.accounts = accounts
    }
}
