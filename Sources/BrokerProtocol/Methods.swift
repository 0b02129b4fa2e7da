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
    case recoverCaches
    case resetWaitingCaches
    case backupCache
    case restoreCache
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
public let brokerProtocolVersion = "1.8"
public let brokerVersion = "0.1.0"

public struct NoParams: Codable, Sendable {
    public init() {}
}

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
