import BrokerJSON

/// A successful token response (RFC 6749 §5.1, OIDC Core §3.1.3.3, plus Microsoft's `client_info` and `foci`).
public struct TokenResponse: Sendable {
    public var accessToken: String
    public var tokenType: String
    public var expiresIn: Int64
    public var extExpiresIn: Int64?
    public var refreshIn: Int64?
    public var refreshToken: String?
    public var idToken: String?
    /// Space-separated scopes the IdP granted; nil when it did not say (then the request's scopes were granted).
    public var scope: String?
    public var clientInfo: String?
    public var familyId: String?

    /// The longest lifetime taken from an IdP (ten years). The numbers come from outside: clamped here, every sum
    /// with a Unix time stays far from `Int64.max`, and a negative one counts as already expired.
    public static let maxLifetimeSeconds: Int64 = 10 * 365 * 86_400

    /// `expires_in`, `ext_expires_in` and `refresh_in` clamped to 0…`maxLifetimeSeconds`.
    package init(json body: [UInt8]) throws(OAuthFailure) {
        guard case .object(let object)? = try? JSONReader.parse(body) else {
            throw .invalidResponse("the token response is not a JSON object")
        }
        guard let accessToken = object["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw .invalidResponse("the token response has no access_token")
        }
        self.accessToken = accessToken
        tokenType = object["token_type"]?.stringValue ?? "Bearer"
        // Without expires_in, RFC 6749 leaves the lifetime to documentation; an hour is what IdPs use.
        expiresIn = Self.lifetime(object["expires_in"]) ?? 3600
        extExpiresIn = Self.lifetime(object["ext_expires_in"])
        refreshIn = Self.lifetime(object["refresh_in"])
        refreshToken = object["refresh_token"]?.stringValue
        idToken = object["id_token"]?.stringValue
        scope = object["scope"]?.stringValue
        clientInfo = object["client_info"]?.stringValue
        familyId = object["foci"]?.stringValue
    }

    private static func lifetime(_ value: JSONValue?) -> Int64? {
        value?.integerValue.map { min(max($0, 0), maxLifetimeSeconds) }
    }
}

/// RFC 8628 §3.2: what the user is shown, and what the broker polls with.
public struct DeviceAuthorization: Sendable {
    public var deviceCode: String
    public var userCode: String
    public var verificationURI: String
    public var verificationURIComplete: String?
    public var expiresIn: Int64
    public var interval: Int64
    public var message: String?

    /// The longest wait between polls that is honoured, and the longest a device code is waited for: the numbers
    /// come from the IdP, and a huge or negative one must neither trap nor hold a sign-in forever.
    public static let maxInterval: Int64 = 300
    public static let maxExpiresIn: Int64 = 86_400

    /// RFC 8628 §3.2: the response body, its numbers clamped (`interval` to 1…300 s, default 5; `expires_in` to
    /// 1 s…1 day, default 900).
    public init(_ body: [UInt8]) throws(OAuthFailure) {
        guard case .object(let object)? = try? JSONReader.parse(body),
              let deviceCode = object["device_code"]?.stringValue, let userCode = object["user_code"]?.stringValue,
              let uri = object["verification_uri"]?.stringValue ?? object["verification_url"]?.stringValue else {
            throw .invalidResponse("the device authorization response lacks device_code, user_code or verification_uri")
        }
        self.deviceCode = deviceCode
        self.userCode = userCode
        verificationURI = uri
        verificationURIComplete = object["verification_uri_complete"]?.stringValue
        expiresIn = min(max(object["expires_in"]?.integerValue ?? 900, 1), Self.maxExpiresIn)
        interval = min(max(object["interval"]?.integerValue ?? 5, 1), Self.maxInterval)
        message = object["message"]?.stringValue
    }
}
