import BrokerJSON

// getStatus: the daemon, its key store and the network as it sees them.

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
    /// Cache databases kept for a key the key store does not hold now (since protocol 1.8; absent from older
    /// daemons): `recoverCaches` merges them back, `resetWaitingCaches` gives them up.
    public var waitingCaches: [String]?

    public init(version: String, protocolVersion: String, pid: Int32, startedAt: Int64, uptimeSeconds: Int64,
                socket: String, socketActivated: Bool, configPath: String?, configPresent: Bool, cachePath: String?,
                keyStore: KeyStoreInfo,
                accounts: Int, accessTokens: Int, refreshTokens: Int, idTokens: Int, appMetadata: Int,
                lastWrite: Int64?, lastWriteError: String?, problems: [String], signInRequired: [String],
                connections: Int, requestsServed: Int, dbusBroker: String? = nil, pendingSignIns: [PendingSignInInfo]? = nil,
                pendingConsents: [PendingConsentInfo]? = nil, network: NetworkStatus? = nil, waitingCaches: [String]? = nil) {
        self.waitingCaches = waitingCaches
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
