import BrokerJSON

/// The claims brokerd uses from an id_token (OIDC Core §2), after the checks of §3.1.3.7.
public struct IdToken: Sendable {
    /// The JWT; nil when the claims came from the userinfo endpoint (nothing to cache as an IdToken).
    public let raw: String?
    public let claims: JSONObject

    /// Claims from the userinfo endpoint, for responses without an id_token.
    public init(userInfo claims: JSONObject) {
        raw = nil
        self.claims = claims
    }

    public var issuer: String? { claims["iss"]?.stringValue }
    public var subject: String? { claims["sub"]?.stringValue }
    public var objectId: String? { claims["oid"]?.stringValue }
    public var tenantId: String? { claims["tid"]?.stringValue }
    /// preferred_username, else upn (ADFS), else email.
    public var username: String? {
        claims["preferred_username"]?.stringValue ?? claims["upn"]?.stringValue ?? claims["email"]?.stringValue
    }
    public var name: String? { claims["name"]?.stringValue }
    public var audiences: [String] {
        if let single = claims["aud"]?.stringValue { return [single] }
        return (claims["aud"]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    public init(raw: String) throws(OAuthFailure) {
        self.raw = raw
        do { claims = try JWTPayload.claims(of: raw) } catch { throw .idToken(error.description) }
    }

    /// iss (the provider's issuer; `{tenantid}` in a multi-tenant issuer stands for `tid`), aud contains the
    /// client, exp not passed and iat not in the future (both with `skew`), and the nonce when one was sent.
    public func validate(issuer expected: String, clientId: String, nonce: String?, now: Int64, skew: Int64 = 300) throws(OAuthFailure) {
        if expected.contains("{tenantid}") && tenantId == nil {
            throw .idToken("the issuer is a multi-tenant template and the token has no tid")
        }
        let expectedIssuer = expected.replacingOccurrences(of: "{tenantid}", with: tenantId ?? "")
        guard let issuer, Self.sameIssuer(issuer, expectedIssuer) else {
            throw .idToken("issuer \(issuer ?? "(none)") is not \(expectedIssuer)")
        }
        guard audiences.contains(clientId) else { throw .idToken("audience does not include client \(clientId)") }
        guard let exp = claims["exp"]?.integerValue else { throw .idToken("no exp claim") }
        // Compared without arithmetic on the claims: an absurd value must not overflow.
        guard exp > now - skew else { throw .idToken("expired at \(exp)") }
        if let iat = claims["iat"]?.integerValue, iat > now + skew { throw .idToken("issued in the future (iat \(iat))") }
        if let nonce {
            guard claims["nonce"]?.stringValue == nonce else { throw .idToken("nonce does not match the request") }
        }
    }

    private static func sameIssuer(_ a: String, _ b: String) -> Bool {
        var x = a, y = b
        while x.hasSuffix("/") { x.removeLast() }
        while y.hasSuffix("/") { y.removeLast() }
        return x == y
    }
}

/// Microsoft's `client_info` (base64url JSON with `uid` and `utid`), the source of MSAL's homeAccountId.
public struct ClientInfo: Sendable, Equatable {
    public var uid: String
    public var utid: String

    public init?(encoded: String) {
        guard let bytes = Base64URL.decode(encoded), case .object(let object)? = try? JSONReader.parse(bytes),
              let uid = object["uid"]?.stringValue, let utid = object["utid"]?.stringValue else { return nil }
        self.uid = uid
        self.utid = utid
    }

    public var homeAccountId: String { "\(uid).\(utid)".lowercased() }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var result = "", rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}
