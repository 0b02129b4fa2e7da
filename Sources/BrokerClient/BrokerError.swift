import BrokerJSON
import BrokerProtocol

/// What the identity provider said when a token request failed (RFC 6749 §5.2 plus Microsoft's extensions). Apps
/// log `correlationId`, show nothing of it to users, and pass `claims` back on the next interactive request.
public struct OAuthErrorDetail: Sendable, Equatable, CustomStringConvertible {
    /// brokerd's message: for people, not for parsing.
    public var message: String
    /// The JSON-RPC error code (MSAL's code for token errors, e.g. -50002).
    public var code: Int
    /// OAuth `error`, e.g. `invalid_grant`.
    public var error: String?
    public var errorDescription: String?
    /// Microsoft's `suberror`, e.g. `basic_action`, `consent_required`.
    public var suberror: String?
    /// msal-python's classification of `suberror`: "" when an app cannot act on it.
    public var classification: String?
    /// AADSTS numbers.
    public var errorCodes: [Int]
    public var correlationId: String?
    /// A claims challenge to send with the next (interactive) request.
    public var claims: String?
    /// `data.reason` for broker-side faults (e.g. `accountNotFound`, `unavailable`).
    public var reason: String?
    /// True when trying again later may work (network or IdP outage); the refresh token was kept.
    public var retryable: Bool
    /// The error's whole `data` member, for fields this version does not know yet.
    public var data: JSONValue?

    /// For errors an app raises itself in the broker's terms (e.g. "nobody is signed in" as interactionRequired).
    public init(message: String, code: Int = RPCErrorCode.interactionRequired) {
        self.init(RPCError(code: code, message: message))
    }

    init(_ rpc: RPCError) {
        let data = rpc.data?.objectValue
        message = rpc.message
        code = rpc.code
        error = data?["error"]?.stringValue
        errorDescription = data?["errorDescription"]?.stringValue
        suberror = data?["suberror"]?.stringValue
        classification = data?["classification"]?.stringValue
        errorCodes = data?["errorCodes"]?.arrayValue?.compactMap { $0.integerValue.map(Int.init) } ?? []
        correlationId = data?["correlationId"]?.stringValue
        claims = data?["claims"]?.stringValue
        reason = data?["reason"]?.stringValue
        retryable = data?["retryable"]?.boolValue ?? false
        self.data = rpc.data
    }

    public var description: String { message }
}

/// Every failure of a `PublicClientApplication` call: MSAL's error vocabulary (same codes as MSAL for iOS/macOS),
/// plus what can go wrong between an app and the broker.
public enum BrokerError: Error, Sendable, CustomStringConvertible {
    /// -50002: silent acquisition cannot work (no refresh token, it was revoked or expired, consent is missing):
    /// call `acquireToken` (interactive).
    case interactionRequired(OAuthErrorDetail)
    /// -50003: the identity provider granted fewer scopes than asked; the granted tokens are cached.
    case serverDeclinedScopes(granted: [String], declined: [String], OAuthErrorDetail)
    /// -50004: conditional access requires an app protection policy.
    case serverProtectionPoliciesRequired(OAuthErrorDetail)
    /// -50005: the user (or the app, by cancelling) ended the interactive sign-in.
    case userCanceled(OAuthErrorDetail?)
    /// -50006: the identity provider failed or could not be reached; see `retryable`.
    case serverError(OAuthErrorDetail)
    /// -50000: brokerd failed in a way the app cannot fix (the message says why).
    case `internal`(OAuthErrorDetail)
    /// The request itself is wrong (-326xx): a missing or invalid parameter, unknown account, bad authority…
    case invalidRequest(OAuthErrorDetail)
    /// -32005: brokerd's app policy refused this app the client ID (`reason`: `denied`, `pinnedToOtherApps`,
    /// `consentTimedOut`…). Not interactionRequired: signing in does not help; the user grants with
    /// `brokerctl apps allow`.
    case appNotAllowed(OAuthErrorDetail)
    /// Nobody serves the socket: brokerd is not running (start `brokerd.socket`).
    case brokerNotRunning(socket: String, reason: String)
    /// brokerd speaks a protocol major version this library does not.
    case incompatibleBroker(protocolVersion: String)
    /// brokerd did not run the request (-320xx): -32001 another user's socket, -32002 too many connections,
    /// -32003 message too large, -32004 shutting down (already retried; try again later).
    case brokerRefused(code: Int, message: String)
    /// The connection to brokerd failed or brokerd answered something unreadable.
    case connection(String)

    /// The MSAL code (-50002 …) or the JSON-RPC code; nil for faults without one (no broker, broken connection).
    /// `userCanceled` is always -50005, also when the app cancelled before brokerd saw the request.
    public var code: Int? {
        switch self {
        case .interactionRequired(let d), .serverProtectionPoliciesRequired(let d), .serverError(let d),
             .internal(let d), .invalidRequest(let d), .serverDeclinedScopes(_, _, let d), .appNotAllowed(let d):
            return d.code
        case .userCanceled: return RPCErrorCode.userCanceled
        case .brokerRefused(let code, _): return code
        case .brokerNotRunning, .incompatibleBroker, .connection: return nil
        }
    }

    /// The OAuth detail, when the error came from brokerd.
    public var detail: OAuthErrorDetail? {
        switch self {
        case .interactionRequired(let d), .serverProtectionPoliciesRequired(let d), .serverError(let d),
             .internal(let d), .invalidRequest(let d), .serverDeclinedScopes(_, _, let d), .appNotAllowed(let d):
            return d
        case .userCanceled(let d): return d
        case .brokerNotRunning, .incompatibleBroker, .brokerRefused, .connection: return nil
        }
    }

    public var description: String {
        switch self {
        case .brokerNotRunning(let socket, let reason): return "brokerd is not running at \(socket) (\(reason))"
        case .incompatibleBroker(let version):
            return "brokerd speaks protocol \(version); this client speaks \(brokerProtocolVersion) (same major version needed)"
        case .connection(let why): return "connection to brokerd failed: \(why)"
        case .brokerRefused(let code, let message): return "brokerd refused the request: \(message) (\(code))"
        case .userCanceled(let d): return d?.message ?? "the sign-in was canceled"
        default: return detail?.message ?? "\(code ?? 0)"
        }
    }

    init(_ error: any Error) {
        switch error {
        case let error as BrokerError:
            self = error
        case BrokerClientError.brokerNotRunning(let socket, let reason):
            self = .brokerNotRunning(socket: socket, reason: reason)
        case BrokerClientError.connection(let why):
            self = .connection(why)
        case BrokerClientError.rpc(let rpc):
            self = BrokerError(rpc)
        case BrokerClientError.incompatibleBroker(let version):
            self = .incompatibleBroker(protocolVersion: version)
        case is CancellationError:
            self = .userCanceled(nil)
        default:
            self = .connection("\(error)")
        }
    }

    init(_ rpc: RPCError) {
        let detail = OAuthErrorDetail(rpc)
        switch rpc.code {
        case RPCErrorCode.interactionRequired: self = .interactionRequired(detail)
        case RPCErrorCode.serverDeclinedScopes:
            let data = rpc.data?.objectValue
            func strings(_ key: String) -> [String] { data?[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
            self = .serverDeclinedScopes(granted: strings("grantedScopes"), declined: strings("declinedScopes"), detail)
        case RPCErrorCode.serverProtectionPoliciesRequired: self = .serverProtectionPoliciesRequired(detail)
        case RPCErrorCode.userCanceled: self = .userCanceled(detail)
        case RPCErrorCode.serverError: self = .serverError(detail)
        case RPCErrorCode.brokerInternal, RPCErrorCode.internalError: self = .internal(detail)
        case RPCErrorCode.appNotAllowed: self = .appNotAllowed(detail)
        // By range, for codes of later protocol versions (protocol.md, Versioning rule 3).
        case -32099 ... -32000: self = .brokerRefused(code: rpc.code, message: rpc.message)
        case -50099 ... -50000: self = .internal(detail)
        default: self = .invalidRequest(detail)
        }
    }
}
