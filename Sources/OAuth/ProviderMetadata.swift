import BrokerJSON

/// The endpoints of an OpenID provider, from its discovery document (OIDC Discovery 1.0 §3, RFC 8414).
public struct ProviderMetadata: Sendable, Equatable {
    public var issuer: String
    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    public var deviceAuthorizationEndpoint: String?
    public var jwksURI: String?
    public var revocationEndpoint: String?
    public var userinfoEndpoint: String?

    public init(issuer: String, authorizationEndpoint: String, tokenEndpoint: String,
                deviceAuthorizationEndpoint: String? = nil, jwksURI: String? = nil, revocationEndpoint: String? = nil,
                userinfoEndpoint: String? = nil) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.jwksURI = jwksURI
        self.revocationEndpoint = revocationEndpoint
        self.userinfoEndpoint = userinfoEndpoint
    }

    package init(json body: [UInt8], source: String) throws(OAuthFailure) {
        guard case .object(let object)? = try? JSONReader.parse(body) else {
            throw .invalidResponse("the discovery document at \(source) is not a JSON object")
        }
        func required(_ name: String) throws(OAuthFailure) -> String {
            guard let value = object[name]?.stringValue, !value.isEmpty else {
                throw .invalidResponse("the discovery document at \(source) has no \(name)")
            }
            return value
        }
        self.init(issuer: try required("issuer"), authorizationEndpoint: try required("authorization_endpoint"),
                  tokenEndpoint: try required("token_endpoint"),
                  deviceAuthorizationEndpoint: object["device_authorization_endpoint"]?.stringValue,
                  jwksURI: object["jwks_uri"]?.stringValue, revocationEndpoint: object["revocation_endpoint"]?.stringValue,
                  userinfoEndpoint: object["userinfo_endpoint"]?.stringValue)
    }

    /// The document as brokerd keeps it: the fields read, under their discovery names (`init(json:source:)` reads it).
    public var json: String {
        var object = JSONObject([
            "issuer": .string(issuer), "authorization_endpoint": .string(authorizationEndpoint),
            "token_endpoint": .string(tokenEndpoint),
        ])
        if let deviceAuthorizationEndpoint { object["device_authorization_endpoint"] = .string(deviceAuthorizationEndpoint) }
        if let jwksURI { object["jwks_uri"] = .string(jwksURI) }
        if let revocationEndpoint { object["revocation_endpoint"] = .string(revocationEndpoint) }
        if let userinfoEndpoint { object["userinfo_endpoint"] = .string(userinfoEndpoint) }
        return JSONWriter().string(.object(object))
    }
}
