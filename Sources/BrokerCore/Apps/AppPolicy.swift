import BrokerCache

/// Which app gets which client ID's tokens: the configuration's settings and pins, and the user's grants and denials.
/// Pure: the runtime (AppAccess) holds one of these as a snapshot and asks it.
public struct AppPolicySettings: Sendable, Equatable {
    public enum Sandboxed: String, Sendable, CaseIterable {
        /// A Flatpak or snap gets a client ID's tokens once the user granted it (asked on first use).
        case ask
        /// Only what the user granted ahead of time (`brokerctl apps allow`) or pinned.
        case deny
    }

    public enum Unsandboxed: String, Sendable, CaseIterable {
        /// Any process of the user (today's behaviour), on the record.
        case allow
        /// The first use of each executable with each client ID asks the user.
        case ask
        /// Only the pins (and grants) apply.
        case pinned
    }

    public var sandboxedApps: Sandboxed = .ask
    public var unsandboxedApps: Unsandboxed = .allow
    public var pins: [AppPin] = []
    /// Seconds a request waits for the user's answer before it is refused.
    public var consentTimeoutSeconds = 120

    public init(sandboxedApps: Sandboxed = .ask, unsandboxedApps: Unsandboxed = .allow, pins: [AppPin] = [],
                consentTimeoutSeconds: Int = 120) {
        self.sandboxedApps = sandboxedApps
        self.unsandboxedApps = unsandboxedApps
        self.pins = pins
        self.consentTimeoutSeconds = consentTimeoutSeconds
    }
}

/// `[[pin]]`: a client ID's tokens go to these apps and no other, whatever else the policy says.
///
/// Client IDs are kept and compared lowercased everywhere in the policy: the cache and the identity providers take
/// them in either case, so `04B07795-…` must not escape a pin, a denial or a grant written `04b07795-…`.
public struct AppPin: Sendable, Equatable {
    public var clientId: String
    public var apps: [AppID]

    public init(clientId: String, apps: [AppID]) {
        self.clientId = clientId.lowercased()
        self.apps = apps
    }
}

/// The user's answer for one app and client ID, kept until revoked. A grant may limit the accounts (home account
/// IDs or usernames) and the scopes (patterns with `*`); empty means any.
public struct AppGrant: Sendable, Equatable {
    public var app: AppID
    public var clientId: String
    public var allowed: Bool
    public var accounts: [String]
    public var scopes: [String]
    /// Unix seconds.
    public var since: Int64

    public init(app: AppID, clientId: String, allowed: Bool, accounts: [String] = [], scopes: [String] = [], since: Int64) {
        self.app = app
        self.clientId = clientId.lowercased()
        self.allowed = allowed
        self.accounts = accounts
        self.scopes = scopes
        self.since = since
    }

    /// Whether a request for `account` (either of its names; nil when the request names none yet) and `scopes` is
    /// inside this grant.
    public func covers(account: (homeAccountId: String?, username: String?)?, scopes requested: [String]) -> Bool {
        if !accounts.isEmpty, let account {
            let names = [account.homeAccountId, account.username].compactMap { $0?.lowercased() }
            guard accounts.contains(where: { names.contains($0.lowercased()) }) else { return false }
        }
        if !scopes.isEmpty {
            for scope in requested where !Scopes.reserved.contains(scope.lowercased()) {
                guard scopes.contains(where: { Self.matches(pattern: $0, scope) }) else { return false }
            }
        }
        return true
    }

    /// `*` matches any run of characters; case-insensitive, as scopes are.
    static func matches(pattern: String, _ text: String) -> Bool {
        let pattern = Array(pattern.lowercased().utf8), text = Array(text.lowercased().utf8)
        var p = 0, t = 0, star = -1, mark = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = p
                mark = t
                p += 1
            } else if p < pattern.count, pattern[p] == text[t] {
                p += 1
                t += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                t = mark
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }
}

/// Why a call was refused: a stable word for apps and scripts, and a sentence for people.
public struct AccessRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        /// brokerd could not tell which app is asking.
        case unidentifiedCaller
        /// The client ID is pinned to other apps.
        case pinnedToOtherApps
        /// The user denied this app the client ID (remembered until revoked).
        case denied
        /// `sandboxed_apps = "deny"` and no grant.
        case sandboxedAppsDenied
        /// `unsandboxed_apps = "pinned"` and the client ID is pinned to nobody or no grant covers it.
        case notPinned
        /// A grant exists but does not cover this account or these scopes.
        case outsideGrant
        /// Nobody answered the consent in time (asked again next time).
        case consentTimedOut
    }

    public var reason: Reason
    public var app: AppID
    public var clientId: String
    public var message: String

    public init(_ reason: Reason, app: AppID, clientId: String, message: String) {
        self.reason = reason
        self.app = app
        self.clientId = clientId
        self.message = message
    }

    public var description: String { message }
}

public enum AccessDecision: Sendable, Equatable {
    case allow(AccessBasis)
    case refuse(AccessRefusal)
    case ask
}

/// Why a call was allowed (for the audit).
public enum AccessBasis: String, Sendable {
    case unsandboxedDefault = "default"
    case pinned
    case granted
    case allowedOnce
}

public struct AppPolicy: Sendable {
    public var settings: AppPolicySettings
    /// By app and client ID.
    public private(set) var grants: [GrantKey: AppGrant] = [:]

    public struct GrantKey: Hashable, Sendable {
        public var app: AppID
        public var clientId: String
        public init(app: AppID, clientId: String) {
            self.app = app
            self.clientId = clientId.lowercased()
        }
    }

    public init(settings: AppPolicySettings = AppPolicySettings(), grants: [AppGrant] = []) {
        self.settings = settings
        for grant in grants { self.grants[GrantKey(app: grant.app, clientId: grant.clientId)] = grant }
    }

    public mutating func set(_ grant: AppGrant) { grants[GrantKey(app: grant.app, clientId: grant.clientId)] = grant }

    /// Removes the grants and denials of `app` (for one client ID, or all); returns how many went.
    public mutating func revoke(_ app: AppID, clientId: String?) -> Int {
        let keys = grants.keys.filter { $0.app == app && (clientId == nil || $0.clientId == clientId!.lowercased()) }
        for key in keys { grants[key] = nil }
        return keys.count
    }

    public func grant(_ app: AppID, clientId: String) -> AppGrant? { grants[GrantKey(app: app, clientId: clientId)] }

    /// The pins that name this client ID.
    public func pins(of clientId: String) -> [AppPin] {
        guard !settings.pins.isEmpty else { return [] }
        let clientId = clientId.lowercased()
        return settings.pins.filter { $0.clientId == clientId }
    }

    /// The rules in order: an unidentified caller never; a pin decides alone; then the user's denial or grant; then
    /// the defaults for sandboxed and unsandboxed apps.
    public func decide(_ caller: CallerIdentity, clientId: String, account: (homeAccountId: String?, username: String?)?,
                       scopes: [String]) -> AccessDecision {
        let app = caller.app
        if let failure = caller.failure {
            return .refuse(AccessRefusal(.unidentifiedCaller, app: app, clientId: clientId,
                                         message: "brokerd could not tell which app is asking (\(failure)); no token is given out"))
        }
        let pins = pins(of: clientId)
        if !pins.isEmpty {
            guard pins.contains(where: { $0.apps.contains(app) }) else {
                let allowed = pins.flatMap(\.apps).map(\.description).joined(separator: ", ")
                return .refuse(AccessRefusal(.pinnedToOtherApps, app: app, clientId: clientId,
                                             message: "client ID \(clientId) is pinned to \(allowed); \(app) may not use it"))
            }
            return .allow(.pinned)
        }
        if let grant = grant(app, clientId: clientId) {
            guard grant.allowed else {
                return .refuse(AccessRefusal(.denied, app: app, clientId: clientId,
                                             message: "\(app) was denied client ID \(clientId) (brokerctl apps revoke to undo)"))
            }
            guard grant.covers(account: account, scopes: scopes) else {
                return .refuse(AccessRefusal(.outsideGrant, app: app, clientId: clientId,
                                             message: "\(app) was granted client ID \(clientId) for other accounts or scopes"))
            }
            return .allow(.granted)
        }
        if app.isSandboxed {
            switch settings.sandboxedApps {
            case .ask: return .ask
            case .deny:
                return .refuse(AccessRefusal(.sandboxedAppsDenied, app: app, clientId: clientId,
                    message: "\(app) has no grant for client ID \(clientId) (sandboxed_apps = \"deny\"; brokerctl apps allow)"))
            }
        }
        switch settings.unsandboxedApps {
        case .allow: return .allow(.unsandboxedDefault)
        case .ask: return .ask
        case .pinned:
            return .refuse(AccessRefusal(.notPinned, app: app, clientId: clientId,
                message: "client ID \(clientId) is pinned to no app and \(app) has no grant (unsandboxed_apps = \"pinned\")"))
        }
    }
}
