/// Events for `subscribe` (SPEC §5).
public enum BrokerEvent: Sendable, Equatable {
    case accountAdded(homeAccountId: String)
    /// Removed from one app (`clientId`) or signed out everywhere (`clientId` nil).
    case accountRemoved(homeAccountId: String, clientId: String?)
    /// A refresh failed with invalid_grant: the account needs an interactive sign-in.
    case signInRequired(homeAccountId: String, clientId: String)
    case statusChanged
    /// A device-code sign-in waits for the user (the code and where to enter it).
    case signInPending(PendingSignIn)
    /// A pending sign-in ended.
    case signInEnded(requestId: String, clientId: String, end: SignInEnd)
    /// An app waits for the user to say whether it may use a client ID (AppAccess).
    case consentPending(PendingConsent)
    /// That question was answered, or timed out.
    case consentEnded(PendingConsent, ConsentEnd)
    /// A browser sign-in waits for the user at `url` (the authorization request: it carries the flow's `state` and
    /// PKCE challenge, never a secret that redeems it). For hooks; not a `subscribe` event (the app that asked gets the
    /// URL as its `browserUrl` prompt).
    case browserSignInPending(requestId: String, clientId: String, loginHint: String?, url: String)
    /// A refresh token was redeemed (an app's request or the background refresh). For hooks; not a `subscribe` event.
    case tokenRefreshed(homeAccountId: String, clientId: String, authority: String)
    /// The background refresh could not renew a token and will try again (the IdP unreachable, a server error); a
    /// refused refresh token is `signInRequired` instead. For hooks; not a `subscribe` event. `reason` never holds a
    /// secret: it is the failure's description.
    case refreshFailed(homeAccountId: String, clientId: String, authority: String, reason: String, retryInSeconds: Int64)

    public var name: String {
        switch self {
        case .accountAdded: return "accountAdded"
        case .accountRemoved: return "accountRemoved"
        case .signInRequired: return "signInRequired"
        case .statusChanged: return "statusChanged"
        case .signInPending: return "signInPending"
        case .signInEnded: return "signInEnded"
        case .consentPending: return "consentPending"
        case .consentEnded: return "consentEnded"
        case .browserSignInPending: return "browserSignInPending"
        case .tokenRefreshed: return "tokenRefreshed"
        case .refreshFailed: return "refreshFailed"
        }
    }
}

extension Broker {
    /// Events from now on, until the stream is dropped.
    public func events() -> AsyncStream<BrokerEvent> {
        let (stream, continuation) = AsyncStream<BrokerEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = nextSubscriber
        nextSubscriber += 1
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(id) }
        }
        return stream
    }

    private func unsubscribe(_ id: Int) {
        subscribers[id] = nil
    }

    /// Sends an event of another part of the broker (AppAccess's consents) to the subscribers.
    public func publish(_ event: BrokerEvent) { emit(event) }

    /// Makes every answer a connection remembers stale (`isStillFresh` fails from now on): the app policy changed, and a
    /// remembered answer was given under the old one.
    public nonisolated func forgetRememberedAnswers() {
        cell.withLock { $0.cacheChanged() }
    }

    func emit(_ event: BrokerEvent) {
        for continuation in subscribers.values { continuation.yield(event) }
    }
}
