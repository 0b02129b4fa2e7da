/// A request from an app that the user has not answered yet: what `getStatus.pendingConsents` lists, what
/// `consentPending` announces and what the desktop notification asks. One per app and client ID; every request of
/// that app for that client ID waits on it.
public struct PendingConsent: Sendable, Equatable {
    public var consentId: String
    public var app: AppID
    public var executable: String?
    public var clientId: String
    /// `socket` or `dbus`: where the first waiting request came from.
    public var frontEnd: String
    /// Unix seconds.
    public var since: Int64
    /// When the waiting requests are refused if nobody answers (Unix seconds).
    public var expiresOn: Int64
    /// Requests waiting on it.
    public var waiting: Int
}

/// The user's answer to a consent, or a grant set ahead of time (`brokerctl apps allow|deny`).
public enum ConsentAnswer: String, Sendable, CaseIterable {
    /// Granted until revoked.
    case allow
    /// The waiting requests go ahead; the next one asks again.
    case allowOnce
    /// Refused until revoked.
    case deny
}

/// How a pending consent ended (`consentEnded`).
public enum ConsentEnd: String, Sendable {
    case allowed, allowedOnce, denied, timedOut
}
