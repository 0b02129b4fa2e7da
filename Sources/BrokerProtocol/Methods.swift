import BrokerJSON

/// The methods brokerd serves (names as in SPEC §5; the Microsoft Linux broker uses the same verbs).
public enum BrokerMethod: String, CaseIterable, Sendable {
    case getBrokerVersion
    case getStatus
    case getAccounts
    case getAccount
    case removeAccount
    case signOut
    case importCache
    case exportCache
    case acquireTokenSilently
    case acquireTokenInteractively
    case cancelInteractiveFlow
    case subscribe
    case getApps
    case setAppAccess
    case getAuditLog
}

/// Notifications brokerd sends: prompts on the connection of a running interactive request (browserUrl,
/// deviceCode), and events on connections that subscribed.
public enum BrokerNotification: String, CaseIterable, Sendable {
    case browserUrl
    case deviceCode
    // Events for `subscribe`.
    case accountAdded
    case accountRemoved
    case signInRequired
    case statusChanged
    case signInPending
    case signInEnded
    case consentPending
    case consentEnded

    /// What `subscribe` offers (the others are prompts of an interactive request).
    public static let events: [BrokerNotification] = [.accountAdded, .accountRemoved, .signInRequired, .statusChanged,
                                                      .signInPending, .signInEnded, .consentPending, .consentEnded]
}

/// Version of the wire contract. Additive changes (new methods, new optional fields) keep the major number;
/// a client should ignore fields it does not know.
public let brokerProtocolVersion = "1.7"
public let brokerVersion = "0.1.0"

// MARK: - Params

public struct NoParams: Codable, Sendable {
    public init() {}
}

public struct GetAccountsParams: Codable, Sendable {
    /// Accounts removed from this client are left out; without it every account is listed.
    public var clientId: String?
    public init(clientId: String? = nil) { self.clientId = clientId }
}

public struct GetAccountParams: Codable, Sendable {
    public var clientId: String
    public var homeAccountId: String?
    public var username: String?
    public init(clientId: String, homeAccountId: String? = nil, username: String? = nil) {
        self.clientId = clientId
        self.homeAccountId = homeAccountId
        self.username = username
    }
}

/// An account as a request names it: a string (homeAccountId, else username) or an object with
/// `homeAccountId` and/or `username` (what `getAccounts` returned may be passed back as it is).
public struct AccountReference: Codable, Sendable, Equatable {
    public var homeAccountId: String?
    public var username: String?
    /// Set when the caller sent a bare string.
    public var text: String?

    public init(_ text: String) { self.text = text }
    public init(homeAccountId: String? = nil, username: String? = nil) {
        self.homeAccountId = homeAccountId
        self.username = username
    }

    private enum CodingKeys: String, CodingKey { case homeAccountId, username }

    public init(from decoder: Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let text = try? single.decode(String.self) {
            self.text = text
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        homeAccountId = try container.decodeIfPresent(String.self, forKey: .homeAccountId)
        username = try container.decodeIfPresent(String.self, forKey: .username)
        if homeAccountId == nil && username == nil {
            throw DecodingError.dataCorruptedError(forKey: .homeAccountId, in: container,
                                                   debugDescription: "an account needs homeAccountId or username")
        }
    }

    public func encode(to encoder: Encoder) throws {
        if let text {
            var single = encoder.singleValueContainer()
            try single.encode(text)
            return
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(homeAccountId, forKey: .homeAccountId)
        try container.encodeIfPresent(username, forKey: .username)
    }
}

public struct RemoveAccountParams: Codable, Sendable {
    public var clientId: String
    public var account: AccountReference
    public init(clientId: String, account: AccountReference) {
        self.clientId = clientId
        self.account = account
    }
}

public struct SignOutParams: Codable, Sendable {
    public var account: AccountReference
    public init(account: AccountReference) { self.account = account }
}

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

// MARK: - Results

public struct BrokerVersionResult: Codable, Sendable, Equatable {
    public var version: String
    public var protocolVersion: String
    public var methods: [String]
    public init(version: String, protocolVersion: String, methods: [String]) {
        self.version = version
        self.protocolVersion = protocolVersion
        self.methods = methods
    }
}

public struct AccessTokenInfo: Codable, Sendable, Equatable {
    public var scopes: [String]
    public var realm: String?
    public var expiresOn: Int64?
    public init(scopes: [String], realm: String?, expiresOn: Int64?) {
        self.scopes = scopes
        self.realm = realm
        self.expiresOn = expiresOn
    }
}

public struct AppTokens: Codable, Sendable, Equatable {
    public var clientId: String
    public var familyId: String?
    public var hasRefreshToken: Bool
    public var accessTokens: [AccessTokenInfo]
    public init(clientId: String, familyId: String?, hasRefreshToken: Bool, accessTokens: [AccessTokenInfo]) {
        self.clientId = clientId
        self.familyId = familyId
        self.hasRefreshToken = hasRefreshToken
        self.accessTokens = accessTokens
    }
}

public struct TenantProfile: Codable, Sendable, Equatable {
    public var realm: String
    public var environment: String
    public var localAccountId: String?
    public var username: String?
    public init(realm: String, environment: String, localAccountId: String?, username: String?) {
        self.realm = realm
        self.environment = environment
        self.localAccountId = localAccountId
        self.username = username
    }
}

/// An account (SPEC §2): stable `homeAccountId`, displayable `username`, `environment`, home `realm`, and the
/// tenants it signed in to. `apps` says which clients hold tokens for it (never the tokens).
public struct Account: Codable, Sendable, Equatable {
    public var homeAccountId: String
    public var username: String
    public var environment: String
    public var realm: String
    public var localAccountId: String?
    public var name: String?
    public var authorityType: String?
    public var tenantProfiles: [TenantProfile]
    public var apps: [AppTokens]
    public var hiddenFrom: [String]
    public var signInRequired: Bool
    /// The claims of the account's id_token in its home tenant (MSAL's `accountClaims`), when one is cached.
    public var accountClaims: JSONValue?

    public init(homeAccountId: String, username: String, environment: String, realm: String, localAccountId: String?,
                name: String?, authorityType: String?, tenantProfiles: [TenantProfile], apps: [AppTokens],
                hiddenFrom: [String], signInRequired: Bool, accountClaims: JSONValue? = nil) {
        self.accountClaims = accountClaims
        self.homeAccountId = homeAccountId
        self.username = username
        self.environment = environment
        self.realm = realm
        self.localAccountId = localAccountId
        self.name = name
        self.authorityType = authorityType
        self.tenantProfiles = tenantProfiles
        self.apps = apps
        self.hiddenFrom = hiddenFrom
        self.signInRequired = signInRequired
    }
}

public struct AccountsResult: Codable, Sendable, Equatable {
    public var accounts: [Account]
    public init(accounts: [Account]) { self.accounts = accounts }
}

public struct AccountResult: Codable, Sendable, Equatable {
    /// null when no account matches (or it was removed from this client), as MSAL's `account(forIdentifier:)`.
    public var account: Account?
    public init(account: Account?) { self.account = account }

    private enum CodingKeys: String, CodingKey { case account }

    /// `"account": null` is written out, not left away: clients test the member.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(account, forKey: .account)
    }
}

public struct RemovalResult: Codable, Sendable, Equatable {
    public var homeAccountId: String
    public var removedAccessTokens: Int
    public var removedRefreshTokens: Int
    public var removedIdTokens: Int
    public var removedAccounts: Int
    public var familyRefreshTokensKept: Int
    public init(homeAccountId: String, removedAccessTokens: Int, removedRefreshTokens: Int, removedIdTokens: Int,
                removedAccounts: Int, familyRefreshTokensKept: Int) {
        self.homeAccountId = homeAccountId
        self.removedAccessTokens = removedAccessTokens
        self.removedRefreshTokens = removedRefreshTokens
        self.removedIdTokens = removedIdTokens
        self.removedAccounts = removedAccounts
        self.familyRefreshTokensKept = familyRefreshTokensKept
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

public struct KeyStoreInfo: Codable, Sendable, Equatable {
    /// `secret-service`, `file` or `memory`.
    public var kind: String
    public var path: String?
    /// Where the key is (since protocol 1.5): the key file, "gnome-keyring on the session bus", "nothing on disk".
    public var location: String?
    /// Why this store is in use (since protocol 1.5): the config's choice, or what `key_store = "auto"` found.
    public var reason: String?
    public init(kind: String, path: String?, location: String? = nil, reason: String? = nil) {
        self.kind = kind
        self.path = path
        self.location = location
        self.reason = reason
    }
}

public struct StatusResult: Codable, Sendable, Equatable {
    public var version: String
    public var protocolVersion: String
    public var pid: Int32
    public var startedAt: Int64
    public var uptimeSeconds: Int64
    public var socket: String
    public var socketActivated: Bool
    public var configPath: String?
    /// Whether the config file exists (otherwise brokerd runs on defaults).
    public var configPresent: Bool
    public var cachePath: String?
    public var keyStore: KeyStoreInfo
    public var accounts: Int
    public var accessTokens: Int
    public var refreshTokens: Int
    public var idTokens: Int
    public var appMetadata: Int
    public var lastWrite: Int64?
    public var lastWriteError: String?
    public var problems: [String]
    public var signInRequired: [String]
    public var connections: Int
    public var requestsServed: Int
    /// The com.microsoft.identity.broker1 front end (since protocol 1.4): absent when it is off, else whether it
    /// serves and, when not, why (another process owns the name, no session bus).
    public var dbusBroker: String?
    /// Device-code sign-ins waiting for the user (since protocol 1.5; absent from older daemons).
    public var pendingSignIns: [PendingSignInInfo]?
    /// Apps waiting for the user's consent (since protocol 1.6; absent from older daemons).
    public var pendingConsents: [PendingConsentInfo]?
    /// What brokerd knows of the network (since protocol 1.7; absent from older daemons).
    public var network: NetworkStatus?

    public init(version: String, protocolVersion: String, pid: Int32, startedAt: Int64, uptimeSeconds: Int64,
                socket: String, socketActivated: Bool, configPath: String?, configPresent: Bool, cachePath: String?,
                keyStore: KeyStoreInfo,
                accounts: Int, accessTokens: Int, refreshTokens: Int, idTokens: Int, appMetadata: Int,
                lastWrite: Int64?, lastWriteError: String?, problems: [String], signInRequired: [String],
                connections: Int, requestsServed: Int, dbusBroker: String? = nil, pendingSignIns: [PendingSignInInfo]? = nil,
                pendingConsents: [PendingConsentInfo]? = nil, network: NetworkStatus? = nil) {
        self.pendingConsents = pendingConsents
        self.network = network
        self.version = version
        self.protocolVersion = protocolVersion
        self.pid = pid
        self.startedAt = startedAt
        self.uptimeSeconds = uptimeSeconds
        self.socket = socket
        self.socketActivated = socketActivated
        self.configPath = configPath
        self.configPresent = configPresent
        self.cachePath = cachePath
        self.keyStore = keyStore
        self.accounts = accounts
        self.accessTokens = accessTokens
        self.refreshTokens = refreshTokens
        self.idTokens = idTokens
        self.appMetadata = appMetadata
        self.lastWrite = lastWrite
        self.lastWriteError = lastWriteError
        self.problems = problems
        self.signInRequired = signInRequired
        self.connections = connections
        self.requestsServed = requestsServed
        self.dbusBroker = dbusBroker
        self.pendingSignIns = pendingSignIns
    }
}

// MARK: - Coding

/// The wire's one JSON stack: JSONReader parses, JSONValueDecoder/JSONValueEncoder map to and from the protocol
/// types, JSONWriter writes (compact, keys sorted, as JSONEncoder with `.sortedKeys` wrote them).
public enum ProtocolCoding {
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try JSONValueEncoder().encodeToBytes(value)
    }

    /// From params or a result as the envelope's reader parsed them.
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try JSONValueDecoder().decode(type, from: value)
    }

    /// From JSON text (a notification's params, a result as the client received it).
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONValueDecoder().decode(type, from: bytes)
    }

    /// A readable account of why params did not decode: which field, and what was wrong with it.
    public static func describe(_ error: Error) -> String {
        guard let decoding = error as? DecodingError else { return "\(error)" }
        func path(_ codingPath: [CodingKey], _ last: CodingKey? = nil) -> String {
            let keys = (codingPath + (last.map { [$0] } ?? [])).map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "params" : keys.joined(separator: ".")
        }
        switch decoding {
        case .keyNotFound(let key, let context):
            return "missing parameter '\(path(context.codingPath, key))'"
        case .typeMismatch(let type, let context):
            return "parameter '\(path(context.codingPath))' must be \(describe(type))"
        case .valueNotFound(let type, let context):
            return "parameter '\(path(context.codingPath))' must be \(describe(type)), not null"
        case .dataCorrupted(let context):
            return "parameter '\(path(context.codingPath))': \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type: return "an integer"
        case is [String].Type: return "an array of strings"
        default: return "of type \(type)"
        }
    }
}

/// The network as brokerd sees it (`getStatus.network`, since protocol 1.7).
public struct NetworkStatus: Codable, Sendable, Equatable {
    /// Hosts whose last attempt failed: requests to them fail at once for `retryAfter` more seconds.
    public var unreachableHosts: [UnreachableHost]
    /// What the network told brokerd and when (kept across restarts, used offline).
    public var learned: [LearnedFact]
    /// Each IdP host's clock minus ours, from the `Date` header of its last answer.
    public var clockSkew: [HostClockSkew]

    public init(unreachableHosts: [UnreachableHost], learned: [LearnedFact], clockSkew: [HostClockSkew] = []) {
        self.unreachableHosts = unreachableHosts
        self.learned = learned
        self.clockSkew = clockSkew
    }
}

public struct HostClockSkew: Codable, Sendable, Equatable {
    public var host: String
    /// The host's time minus ours, in seconds (one-second resolution).
    public var skewSeconds: Int64
    /// Our Unix time when it was measured.
    public var measuredAt: Int64

    public init(host: String, skewSeconds: Int64, measuredAt: Int64) {
        self.host = host
        self.skewSeconds = skewSeconds
        self.measuredAt = measuredAt
    }
}

public struct UnreachableHost: Codable, Sendable, Equatable {
    public var host: String
    /// What the last attempt ran into (connection refused, timed out …).
    public var reason: String
    public var failures: Int
    /// Seconds until the host is tried again (0: the next request tries it).
    public var retryAfter: Int64

    public init(host: String, reason: String, failures: Int, retryAfter: Int64) {
        self.host = host
        self.reason = reason
        self.failures = failures
        self.retryAfter = retryAfter
    }
}

public struct LearnedFact: Codable, Sendable, Equatable {
    /// `discovery` (a discovery document, by the URL it came from), `aliases` (instance discovery's host aliases,
    /// by host) or `tenant` (the tenant id of a tenant name, by `environment/name`).
    public var kind: String
    public var subject: String
    /// Unix seconds.
    public var learnedAt: Int64

    public init(kind: String, subject: String, learnedAt: Int64) {
        self.kind = kind
        self.subject = subject
        self.learnedAt = learnedAt
    }
}
