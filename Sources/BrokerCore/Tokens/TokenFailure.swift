import BrokerCache
internal import OAuth

/// The error an identity provider answered with (RFC 6749 §5.2 plus Microsoft's members), as front ends report it:
/// BrokerCore's own type, so that its API does not expose the OAuth module's.
public struct IdPError: Sendable, Equatable, CustomStringConvertible {
    public var error: String
    public var errorDescription: String?
    public var errorCodes: [Int]
    public var suberror: String?
    public var claims: String?
    public var correlationId: String?
    public var traceId: String?
    public var httpStatus: Int

    public init(error: String, errorDescription: String? = nil, errorCodes: [Int] = [], suberror: String? = nil,
                claims: String? = nil, correlationId: String? = nil, traceId: String? = nil, httpStatus: Int = 400) {
        self.error = error
        self.errorDescription = errorDescription
        self.errorCodes = errorCodes
        self.suberror = suberror
        self.claims = claims
        self.correlationId = correlationId
        self.traceId = traceId
        self.httpStatus = httpStatus
    }

    init(_ response: OAuthErrorResponse) {
        self.init(error: response.error, errorDescription: response.errorDescription, errorCodes: response.errorCodes,
                  suberror: response.suberror, claims: response.claims, correlationId: response.correlationId,
                  traceId: response.traceId, httpStatus: response.httpStatus)
    }

    public var description: String {
        var text = error
        if let suberror { text += " (\(suberror))" }
        if let errorDescription { text += ": \(errorDescription)" }
        return text
    }
}

/// What was wrong with a request the broker refused as invalid. The raw value is the wire's word (the socket's
/// `data.reason`, docs/protocol.md) and the audit's; each front end maps the case, never the text.
public enum InvalidRequestReason: String, Sendable, Equatable, CaseIterable {
    /// The account named matches several (a username in more than one tenant or cloud).
    case ambiguousAccount
    case missingScopes
    /// An interactive sign-in of the same app (and login hint) is already running.
    case interactiveFlowRunning
    /// No authority in the request, the client's profile or the configuration.
    case missingAuthority
    case invalidAuthority
    /// An authority on a host that is not known to be Microsoft's (authority validation).
    case untrustedAuthority
    /// The authority's discovery document could not be had or read.
    case discoveryFailed
}

/// Why a token request failed, in the vocabulary apps act on (SPEC §2, MSAL's codes). The OAuth detail the IdP
/// gave travels along; secrets never do.
public enum TokenFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Only an interactive sign-in can help (no refresh token, it was refused, the account was removed from the app).
    case interactionRequired(String, IdPError?)
    /// The IdP granted fewer scopes than asked; the granted tokens are cached.
    case serverDeclinedScopes(granted: [String], declined: [String])
    case protectionPoliciesRequired(IdPError)
    case userCanceled(String)
    /// The IdP refused in a way sign-in cannot fix (invalid_client, invalid_scope, a bad redirect…).
    case serverError(String, IdPError?)
    /// The IdP could not be reached or was temporarily unable to answer. Retry later; nothing was deleted.
    /// `retryAfter`: the network could not reach the IdP's host, which is not tried again for that many seconds
    /// (sooner if the network changes); nil when the IdP answered but could not serve now.
    case unavailable(String, retryAfter: Int64? = nil)
    /// The request itself is wrong (unknown authority, missing account, a flow already running…).
    case invalidRequest(String, reason: InvalidRequestReason)
    case `internal`(String)

    public var description: String {
        switch self {
        case .interactionRequired(let why, _): return "interaction required: \(why)"
        case .serverDeclinedScopes(let granted, let declined):
            return "the identity provider declined scope(s) \(declined.joined(separator: " ")); granted: \(granted.joined(separator: " "))"
        case .protectionPoliciesRequired(let oauth): return "protection policies required: \(oauth)"
        case .userCanceled(let why): return "canceled: \(why)"
        case .serverError(let why, _): return why
        case .unavailable(let why, _): return why
        case .invalidRequest(let why, _): return why
        case .internal(let why): return "internal error: \(why)"
        }
    }

    public var oauth: IdPError? {
        switch self {
        case .interactionRequired(_, let oauth), .serverError(_, let oauth): return oauth
        case .protectionPoliciesRequired(let oauth): return oauth
        default: return nil
        }
    }

    /// The silent path's reading of an IdP failure (MSAL's `isErrorRecoverableByUserInteraction`): every OAuth
    /// error except invalid_scope / invalid_client / a protection policy becomes InteractionRequired.
    static func fromRefresh(_ failure: OAuthFailure) -> TokenFailure {
        switch failure {
        case .oauth(let oauthResponse):
            let response = IdPError(oauthResponse)
            if response.suberror == "protection_policy_required" { return .protectionPoliciesRequired(response) }
            if ["invalid_scope", "invalid_client"].contains(response.error) {
                return .serverError("the identity provider refused the request: \(response)", response)
            }
            return .interactionRequired("the refresh token was refused (\(response.error))", response)
        case .transient(let why): return .unavailable(why)
        case .unreachable(let blocked): return .unavailable(failure.description, retryAfter: blocked.retryAfter)
        default: return .serverError(failure.description, nil)
        }
    }

    /// An interactive flow's reading: access_denied is the user saying no.
    static func fromInteractive(_ failure: OAuthFailure) -> TokenFailure {
        switch failure {
        case .oauth(let oauthResponse):
            let response = IdPError(oauthResponse)
            if response.error == "access_denied" { return .userCanceled("the sign-in was declined") }
            if response.suberror == "protection_policy_required" { return .protectionPoliciesRequired(response) }
            return .serverError("the identity provider refused the sign-in: \(response)", response)
        case .transient(let why): return .unavailable(why)
        case .unreachable(let blocked): return .unavailable(failure.description, retryAfter: blocked.retryAfter)
        case .configuration(let why): return .invalidRequest(why, reason: .invalidAuthority)
        default: return .serverError(failure.description, nil)
        }
    }
}

extension TokenFailure {
    /// The failure's word in the audit (`brokerctl log`): the kind, never the detail, which may quote the IdP.
    public var auditWord: String {
        switch self {
        case .interactionRequired: return "interactionRequired"
        case .serverDeclinedScopes: return "serverDeclinedScopes"
        case .protectionPoliciesRequired: return "protectionPoliciesRequired"
        case .userCanceled: return "userCanceled"
        case .serverError: return "serverError"
        case .unavailable: return "unavailable"
        case .invalidRequest(_, let reason): return "invalidRequest:\(reason.rawValue)"
        case .internal: return "internal"
        }
    }
}
