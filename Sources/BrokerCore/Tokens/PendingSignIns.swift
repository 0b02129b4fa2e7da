/// A device-code sign-in waiting for the user: what `getStatus` lists and `signInPending` announces, so that the user
/// can finish a sign-in whose app has no way to show it (a D-Bus caller). Never the device code itself: only the
/// user code, which is meant for the user's eyes.
public struct PendingSignIn: Sendable, Equatable {
    public var requestId: String
    public var clientId: String
    public var loginHint: String?
    public var userCode: String
    public var verificationURI: String
    /// When brokerd stops waiting (epoch seconds): the code's expiry or the caller's time limit, whichever comes first.
    public var expiresOn: Int64
    /// The identity provider's instructions (they repeat the user code and the URI).
    public var message: String
}

/// How a pending sign-in ended (`signInEnded`).
public enum SignInEnd: String, Sendable, Equatable {
    /// The user signed in at the identity provider.
    case completed
    /// Cancelled by the app (cancelInteractiveFlow, or the app went away).
    case cancelled
    /// The code expired, or the caller's time limit ran out, before the user signed in.
    case expired
    /// The identity provider refused the sign-in (the user declined it, say), or it failed.
    case failed
}

/// Thrown by DeviceCodeSignIn when its deadline passes; answered as UserCanceled, ended as `expired`.
struct DeviceCodeExpired: Error {}

extension Broker {
    /// The device-code sign-ins waiting now, soonest to expire first.
    public func pendingSignInList() -> [PendingSignIn] {
        pendingSignIns.values.sorted { ($0.expiresOn, $0.requestId) < ($1.expiresOn, $1.requestId) }
    }

    func signInWaiting(_ pending: PendingSignIn) {
        pendingSignIns[pending.requestId] = pending
        logger.info("device-code sign-in waiting for the user", metadata: [
            "request_id": "\(pending.requestId)", "client_id": "\(pending.clientId)",
            "verification_uri": "\(pending.verificationURI)", "expires_on": "\(pending.expiresOn)",
        ])
        emit(.signInPending(pending))
    }

    /// Ends the pending entry of `requestId`, if it has one (a browser sign-in has none).
    func signInEnded(_ requestId: String, _ end: SignInEnd) {
        guard let pending = pendingSignIns.removeValue(forKey: requestId) else { return }
        logger.info("device-code sign-in ended", metadata: [
            "request_id": "\(requestId)", "client_id": "\(pending.clientId)", "outcome": "\(end.rawValue)",
        ])
        emit(.signInEnded(requestId: requestId, clientId: pending.clientId, end: end))
    }

    /// What ended a sign-in that failed with `error` (`cancelled`: its task was cancelled, whatever it then threw).
    static func signInEnd(of error: Error, cancelled: Bool) -> SignInEnd {
        if cancelled || error is CancellationError { return .cancelled }
        return error is DeviceCodeExpired ? .expired : .failed
    }
}

extension Broker {
    /// Whether an interactive sign-in can show the system browser now (`open_browser` and brokerd's environment), and
    /// why: front ends whose callers cannot show a sign-in choose the device code otherwise.
    public func browserAvailability() -> (available: Bool, reason: String) {
        BrowserLauncher.availability(policy: identity?.settings.openBrowser ?? .auto)
    }
}
