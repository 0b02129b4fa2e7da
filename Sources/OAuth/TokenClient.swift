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

    init(json body: [UInt8]) throws(OAuthFailure) {
        guard case .object(let object)? = try? JSONReader.parse(body) else {
            throw .invalidResponse("the token response is not a JSON object")
        }
        guard let accessToken = object["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw .invalidResponse("the token response has no access_token")
        }
        self.accessToken = accessToken
        tokenType = object["token_type"]?.stringValue ?? "Bearer"
        // Without expires_in, RFC 6749 leaves the lifetime to documentation; an hour is what IdPs use.
        expiresIn = object["expires_in"]?.integerValue ?? 3600
        extExpiresIn = object["ext_expires_in"]?.integerValue
        refreshIn = object["refresh_in"]?.integerValue
        refreshToken = object["refresh_token"]?.stringValue
        idToken = object["id_token"]?.stringValue
        scope = object["scope"]?.stringValue
        clientInfo = object["client_info"]?.stringValue
        familyId = object["foci"]?.stringValue
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

/// Calls a provider's token and device-authorization endpoints. Stateless: every call names its endpoint.
public struct TokenClient: Sendable {
    public let transport: HTTPTransport

    public init(transport: HTTPTransport) {
        self.transport = transport
    }

    /// authorization_code grant with the PKCE verifier (RFC 6749 §4.1.3, RFC 7636 §4.5). A code is single-use:
    /// this request is never retried.
    public func redeemCode(_ code: String, verifier: String, redirectURI: String, clientId: String, scopes: [String],
                           claims: String? = nil, metadata: ProviderMetadata) async throws(OAuthFailure) -> TokenResponse {
        var fields = [("grant_type", "authorization_code"), ("client_id", clientId), ("code", code),
                      ("redirect_uri", redirectURI), ("code_verifier", verifier), ("scope", scopes.joined(separator: " ")),
                      ("client_info", "1")]
        if let claims { fields.append(("claims", claims)) }
        return try await tokenRequest(metadata.tokenEndpoint, fields, retry: false)
    }

    /// refresh_token grant (RFC 6749 §6). Retried once only when the IdP said it did not process the request
    /// (503/429): a request that may have reached it is never replayed, since rotation would make the replay a reuse.
    public func refresh(_ refreshToken: String, clientId: String, scopes: [String], claims: String? = nil,
                        extraHeaders: [(String, String)] = [], metadata: ProviderMetadata) async throws(OAuthFailure) -> TokenResponse {
        var fields = [("grant_type", "refresh_token"), ("client_id", clientId), ("refresh_token", refreshToken),
                      ("scope", scopes.joined(separator: " ")), ("client_info", "1")]
        if let claims { fields.append(("claims", claims)) }
        return try await tokenRequest(metadata.tokenEndpoint, fields, headers: extraHeaders, retry: true)
    }

    /// RFC 8628 §3.1.
    public func authorizeDevice(clientId: String, scopes: [String], claims: String? = nil,
                                metadata: ProviderMetadata) async throws(OAuthFailure) -> DeviceAuthorization {
        guard let endpoint = metadata.deviceAuthorizationEndpoint else {
            throw .configuration("the identity provider (\(metadata.issuer)) offers no device authorization endpoint")
        }
        var fields = [("client_id", clientId), ("scope", scopes.joined(separator: " "))]
        if let claims { fields.append(("claims", claims)) }
        let response = try await transport.postForm(endpoint, fields)
        guard response.status == 200 else { throw Self.failure(response) }
        return try DeviceAuthorization(response.body)
    }

    /// One poll of the device_code grant (RFC 8628 §3.4); `authorization_pending` and `slow_down` come back as
    /// `.oauth` errors for the caller's loop.
    public func pollDevice(_ deviceCode: String, clientId: String, metadata: ProviderMetadata) async throws(OAuthFailure) -> TokenResponse {
        try await tokenRequest(metadata.tokenEndpoint, [
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("client_id", clientId),
            ("device_code", deviceCode), ("client_info", "1"),
        ], retry: false)
    }

    /// OIDC UserInfo (Core §5.3): who the access token belongs to. Used when a response carries neither an
    /// id_token nor client_info (the device grant of some providers).
    public func userInfo(accessToken: String, metadata: ProviderMetadata) async throws(OAuthFailure) -> JSONObject {
        guard let endpoint = metadata.userinfoEndpoint else {
            throw .invalidResponse("the token response names no account and the provider has no userinfo endpoint")
        }
        let response = try await transport.get(endpoint, headers: [("Authorization", "Bearer \(accessToken)")])
        guard response.status == 200 else { throw Self.failure(response) }
        guard case .object(let claims)? = try? JSONReader.parse(response.body), claims["sub"]?.stringValue != nil else {
            throw .invalidResponse("the userinfo answer has no sub")
        }
        return claims
    }

    private func tokenRequest(_ endpoint: String, _ fields: [(String, String)], headers: [(String, String)] = [],
                              retry: Bool) async throws(OAuthFailure) -> TokenResponse {
        var response = try await transport.postForm(endpoint, fields, headers: headers)
        if retry, response.status == 503 || response.status == 429 {
            let wait = min(2, Int64(response.header("Retry-After") ?? "") ?? 1)
            try? await Task.sleep(for: .seconds(wait))
            response = try await transport.postForm(endpoint, fields, headers: headers)
        }
        guard response.status == 200 else { throw Self.failure(response) }
        return try TokenResponse(json: response.body)
    }

    static func failure(_ response: HTTPTransport.Response) -> OAuthFailure {
        if let error = OAuthErrorResponse(json: response.body, httpStatus: response.status) {
            // A server_error / temporarily_unavailable is a transient condition, not a verdict on the grant.
            // So is any answer with 429 (throttled) or 503 (unavailable), whatever error it names.
            if error.error == "temporarily_unavailable" || response.status == 429 || response.status == 503
                || (response.status >= 500 && error.error == "server_error") {
                return .transient("HTTP \(response.status) \(error.error)")
            }
            return .oauth(error)
        }
        if response.status == 429 || response.status >= 500 { return .transient("HTTP \(response.status)") }
        return .invalidResponse("HTTP \(response.status) without an OAuth error body")
    }
}
