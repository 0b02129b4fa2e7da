// App identity, consent and audit on the wire (since protocol 1.6): `getApps`, `setAppAccess`, `getAuditLog`, the
// `consentPending`/`consentEnded` events and `getStatus.pendingConsents`.

/// An app brokerd has seen or holds a grant for.
public struct AppInfo: Codable, Sendable, Equatable {
    /// `flatpak:ID`, `snap:NAME` or `exe:PATH`: the name the other app commands take.
    public var app: String
    /// `flatpak`, `snap` or `exe`.
    public var kind: String
    public var executable: String?
    public var unit: String?
    /// Unix seconds; absent for an app known only from a grant or a pin.
    public var firstSeen: Int64?
    public var lastSeen: Int64?
    /// The client IDs it asked for.
    public var clientIds: [String]
    public var grants: [AppGrantInfo]

    public init(app: String, kind: String, executable: String? = nil, unit: String? = nil, firstSeen: Int64? = nil,
                lastSeen: Int64? = nil, clientIds: [String] = [], grants: [AppGrantInfo] = []) {
        self.app = app
        self.kind = kind
        self.executable = executable
        self.unit = unit
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.clientIds = clientIds
        self.grants = grants
    }
}

/// A grant, a denial or a pin of one client ID for one app.
public struct AppGrantInfo: Codable, Sendable, Equatable {
    public var clientId: String
    /// `allow`, `deny` or `pinned` (from the configuration's `[[pin]]`).
    public var decision: String
    /// Accounts the grant is limited to (home account IDs or usernames); absent: any.
    public var accounts: [String]?
    /// Scope patterns the grant is limited to; absent: any.
    public var scopes: [String]?
    /// Unix seconds; absent for a pin.
    public var since: Int64?

    public init(clientId: String, decision: String, accounts: [String]? = nil, scopes: [String]? = nil, since: Int64? = nil) {
        self.clientId = clientId
        self.decision = decision
        self.accounts = accounts
        self.scopes = scopes
        self.since = since
    }
}

public struct AppsResult: Codable, Sendable, Equatable {
    public var apps: [AppInfo]
    public init(apps: [AppInfo]) { self.apps = apps }
}

public struct SetAppAccessParams: Codable, Sendable, Equatable {
    /// `flatpak:ID`, `snap:NAME` or `exe:PATH`.
    public var app: String
    /// Required except for `revoke`, where its absence revokes every client ID of the app.
    public var clientId: String?
    /// `allow`, `allowOnce` (only the requests waiting now), `deny` or `revoke`.
    public var decision: String
    /// `allow` only: limit the grant to these accounts (home account IDs or usernames).
    public var accounts: [String]?
    /// `allow` only: limit the grant to scopes matching these patterns (`*` matches any run of characters).
    public var scopes: [String]?

    public init(app: String, clientId: String?, decision: String, accounts: [String]? = nil, scopes: [String]? = nil) {
        self.app = app
        self.clientId = clientId
        self.decision = decision
        self.accounts = accounts
        self.scopes = scopes
    }
}

public struct SetAppAccessResult: Codable, Sendable, Equatable {
    public var app: String
    public var clientId: String?
    public var decision: String
    /// Requests that were waiting for this answer.
    public var answeredRequests: Int
    /// `revoke`: grants and denials removed.
    public var revoked: Int?

    public init(app: String, clientId: String?, decision: String, answeredRequests: Int, revoked: Int? = nil) {
        self.app = app
        self.clientId = clientId
        self.decision = decision
        self.answeredRequests = answeredRequests
        self.revoked = revoked
    }
}

public struct GetAuditLogParams: Codable, Sendable, Equatable {
    public var app: String?
    public var clientId: String?
    /// A home account ID or a username (case-insensitive).
    public var account: String?
    /// Unix seconds: only calls at or after this time.
    public var since: Int64?
    /// The newest this many rows (default 100, at most 100,000).
    public var limit: Int?

    public init(app: String? = nil, clientId: String? = nil, account: String? = nil, since: Int64? = nil, limit: Int? = nil) {
        self.app = app
        self.clientId = clientId
        self.account = account
        self.since = since
        self.limit = limit
    }
}

/// One audit row: `count` equal calls from `time` to `lastTime`. Never a token or a secret.
public struct AuditEntry: Codable, Sendable, Equatable {
    public var time: Int64
    public var lastTime: Int64
    public var count: Int
    /// `socket` or `dbus`.
    public var frontEnd: String
    public var app: String
    public var pid: Int32
    public var executable: String?
    public var clientId: String
    public var scopes: [String]
    public var homeAccountId: String?
    public var username: String?
    /// `cache`, `refresh`, `interactive`, `refused`, or the failure's word (`interactionRequired`, `serverError`, …).
    public var outcome: String
    public var detail: String?

    public init(time: Int64, lastTime: Int64, count: Int, frontEnd: String, app: String, pid: Int32, executable: String?,
                clientId: String, scopes: [String], homeAccountId: String?, username: String?, outcome: String, detail: String?) {
        self.time = time
        self.lastTime = lastTime
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

public struct AuditLogResult: Codable, Sendable, Equatable {
    /// Newest first.
    public var entries: [AuditEntry]
    public init(entries: [AuditEntry]) { self.entries = entries }
}

/// A request of an app that waits for the user's consent (`getStatus.pendingConsents`, `consentPending`).
public struct PendingConsentInfo: Codable, Sendable, Equatable {
    public var consentId: String
    public var app: String
    public var executable: String?
    public var clientId: String
    /// `socket` or `dbus`.
    public var frontEnd: String
    public var since: Int64
    /// When the waiting requests are refused if nobody answers.
    public var expiresOn: Int64
    /// Requests waiting on this answer.
    public var waiting: Int

    public init(consentId: String, app: String, executable: String?, clientId: String, frontEnd: String, since: Int64,
                expiresOn: Int64, waiting: Int) {
        self.consentId = consentId
        self.app = app
        self.executable = executable
        self.clientId = clientId
        self.frontEnd = frontEnd
        self.since = since
        self.expiresOn = expiresOn
        self.waiting = waiting
    }
}

public struct ConsentEndedNotification: Codable, Sendable, Equatable {
    public var consentId: String
    public var app: String
    public var clientId: String
    /// `allowed`, `allowedOnce`, `denied` or `timedOut`.
    public var outcome: String

    public init(consentId: String, app: String, clientId: String, outcome: String) {
        self.consentId = consentId
        self.app = app
        self.clientId = clientId
        self.outcome = outcome
    }
}
