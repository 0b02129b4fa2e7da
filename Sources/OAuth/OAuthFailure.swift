import BrokerJSON

/// An OAuth 2.0 error response (RFC 6749 §5.2) with the fields the Microsoft identity platform adds.
/// Never holds a token: only what the IdP said about why it refused.
public struct OAuthErrorResponse: Sendable, Equatable, CustomStringConvertible {
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

    /// Reads an error body; nil when the body is not a JSON object with a string `error`.
    public init?(json body: [UInt8], httpStatus: Int) {
        guard case .object(let object)? = try? JSONReader.parse(body), let error = object["error"]?.stringValue else {
            return nil
        }
        self.init(error: error, errorDescription: object["error_description"]?.stringValue,
                  errorCodes: (object["error_codes"]?.arrayValue ?? []).compactMap { $0.integerValue.map(Int.init) },
                  suberror: object["suberror"]?.stringValue, claims: object["claims"]?.stringValue,
                  correlationId: object["correlation_id"]?.stringValue, traceId: object["trace_id"]?.stringValue,
                  httpStatus: httpStatus)
    }

    public var description: String {
        var text = error
        if let suberror { text += " (\(suberror))" }
        if let errorDescription { text += ": \(errorDescription)" }
        return text
    }
}

/// Why an exchange with the identity provider did not give a usable answer.
public enum OAuthFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The IdP refused with an OAuth error.
    case oauth(OAuthErrorResponse)
    /// The IdP could not be reached or was temporarily unable to answer (connection refused, timeout, 5xx, 429).
    /// Nothing was decided: retry later; no refresh token is given up for this.
    case transient(String)
    /// The host could not be reached: no connection, no answer in time. The host is left alone for
    /// `retryAfter` seconds (HostBackoff): requests to it until then fail at once with this.
    case unreachable(HostBackoff.Blocked)
    /// The IdP answered with something that is not a valid OAuth/OIDC response.
    case invalidResponse(String)
    /// The request cannot be made as asked (an authority that is not https, a missing endpoint).
    case configuration(String)
    /// The id_token failed validation (issuer, audience, expiry, nonce).
    case idToken(String)

    public var description: String {
        switch self {
        case .oauth(let response): return "the identity provider refused: \(response)"
        case .transient(let why): return "the identity provider is unavailable: \(why)"
        case .unreachable(let blocked):
            return "cannot reach \(blocked.host): \(blocked.why) (network; tried again in \(blocked.retryAfter) s, sooner if the network changes)"
        case .invalidResponse(let why): return "unexpected answer from the identity provider: \(why)"
        case .configuration(let why): return why
        case .idToken(let why): return "id_token rejected: \(why)"
        }
    }
}
