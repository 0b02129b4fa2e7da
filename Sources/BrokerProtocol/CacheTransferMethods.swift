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
