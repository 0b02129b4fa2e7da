import BrokerJSON

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
            // Retry-After is the server's number: a negative or huge one must neither trap nor hold the caller.
            let wait = min(max(Int64(response.header("Retry-After") ?? "") ?? 1, 0), 2)
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
