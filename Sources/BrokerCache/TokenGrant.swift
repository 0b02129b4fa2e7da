/// A token response as the cache files it: what the IdP answered, read and checked by the token engine (BrokerCore
/// makes one from OAuth's response and id_token). The cache's rule for adding it is `TokenCache.save`.
public struct TokenGrant: Sendable {
    public var accessToken: String
    public var tokenType: String
    /// Seconds, as the IdP said them (clamped again here: the cache keeps no time it cannot add to).
    public var expiresIn: Int64
    public var extExpiresIn: Int64?
    public var refreshIn: Int64?
    /// Scopes the IdP granted; nil when it did not say (the request's were granted).
    public var grantedScopes: [String]?
    public var refreshToken: String?
    /// `foci`: present, the app is in that family; absent, it is not.
    public var familyId: String?
    /// `client_info` as the IdP sent it, and the home account id it names (`uid.utid`).
    public var clientInfo: String?
    public var clientInfoHomeAccountId: String?
    public var idToken: Identity?

    /// What the id_token says of the user.
    public struct Identity: Sendable {
        public var raw: String?
        public var subject: String?
        public var objectId: String?
        public var tenantId: String?
        public var username: String?
        public var name: String?

        public init(raw: String?, subject: String?, objectId: String?, tenantId: String?, username: String?, name: String?) {
            (self.raw, self.subject, self.objectId, self.tenantId) = (raw, subject, objectId, tenantId)
            (self.username, self.name) = (username, name)
        }
    }

    public init(accessToken: String, tokenType: String, expiresIn: Int64, extExpiresIn: Int64? = nil, refreshIn: Int64? = nil,
                grantedScopes: [String]? = nil, refreshToken: String? = nil, familyId: String? = nil, clientInfo: String? = nil,
                clientInfoHomeAccountId: String? = nil, idToken: Identity? = nil) {
        (self.accessToken, self.tokenType, self.expiresIn, self.extExpiresIn) = (accessToken, tokenType, expiresIn, extExpiresIn)
        (self.refreshIn, self.grantedScopes, self.refreshToken, self.familyId) = (refreshIn, grantedScopes, refreshToken, familyId)
        (self.clientInfo, self.clientInfoHomeAccountId, self.idToken) = (clientInfo, clientInfoHomeAccountId, idToken)
    }
}

/// Where a grant goes: for which app, under which authority, in answer to what.
public struct GrantContext: Sendable {
    public var clientId: String
    /// The authority's host (the cache's `environment`) and tenant (the realm when the id_token names none).
    public var environment: String
    public var tenant: String
    public var requestedScopes: [String]
    /// The refresh token redeemed, rotated in place (a family token keeps its owner).
    public var usedRefreshTokenKey: String?
    /// The account the request was for, when the response names none.
    public var knownHomeAccountId: String?
    public var now: Int64

    public init(clientId: String, environment: String, tenant: String, requestedScopes: [String],
                usedRefreshTokenKey: String? = nil, knownHomeAccountId: String? = nil, now: Int64) {
        (self.clientId, self.environment, self.tenant, self.requestedScopes) = (clientId, environment, tenant, requestedScopes)
        (self.usedRefreshTokenKey, self.knownHomeAccountId, self.now) = (usedRefreshTokenKey, knownHomeAccountId, now)
    }
}

/// What a saved grant gives the caller.
public struct SavedTokens: Sendable {
    public var homeAccountId: String
    public var accessToken: CacheEntity
    public var grantedScopes: [String]
    public var idToken: String?
}

public enum GrantError: Error, Equatable, Sendable {
    /// No client_info, no id_token subject and no known account: the grant cannot be filed under anyone.
    case noAccount
}

extension TokenCache {
    /// The longest lifetime the cache keeps (ten years): an absurd `expires_in` cannot overflow a sum with a time.
    static let maxLifetimeSeconds: Int64 = 10 * 365 * 86_400

    /// Files a grant as MSAL does: the access token (replacing this client's tokens whose scopes intersect it), the
    /// refresh token (rotated in place when `usedRefreshTokenKey` names the one redeemed), and, when an id_token came,
    /// the IdToken and Account entries; the AppMetadata always (its family says whether the app is in one).
    public mutating func save(_ grant: TokenGrant, _ context: GrantContext) throws(GrantError) -> SavedTokens {
        guard let hid = grant.clientInfoHomeAccountId ?? grant.idToken?.subject ?? context.knownHomeAccountId else {
            throw .noAccount
        }
        let (environment, clientId, now) = (context.environment, context.clientId, context.now)
        let realm = grant.idToken?.tenantId ?? context.tenant
        let granted = grant.grantedScopes ?? context.requestedScopes

        var accessToken = CacheEntity()
        accessToken.set("credential_type", "AccessToken")
        accessToken.set("secret", grant.accessToken)
        accessToken.set("home_account_id", hid)
        accessToken.set("environment", environment)
        accessToken.set("client_id", clientId)
        accessToken.set("realm", realm)
        accessToken.set("target", granted.joined(separator: " "))
        accessToken.set("token_type", grant.tokenType)
        accessToken.setTimestamp("cached_at", now)
        func after(_ seconds: Int64) -> Int64 { now + min(max(seconds, 0), Self.maxLifetimeSeconds) }
        accessToken.setTimestamp("expires_on", after(grant.expiresIn))
        accessToken.setTimestamp("extended_expires_on", after(grant.extExpiresIn ?? grant.expiresIn))
        accessToken.setTimestamp("refresh_on", grant.refreshIn.map(after))
        // The OIDC scopes (openid, profile, offline_access) are in almost every token's scope: counting them as an
        // overlap would make two apps' tokens of one client evict each other on every refresh.
        func resourceScopes(_ scopes: [String]) -> Set<String> { Set(scopes.map { $0.lowercased() }).subtracting(Scopes.reserved) }
        let grantedSet = resourceScopes(granted)
        for (key, old) in find(.accessToken, CacheQuery(homeAccountId: hid, environment: environment, clientId: clientId, realm: realm))
        where !grantedSet.isDisjoint(with: resourceScopes(old.target)) {
            remove(.accessToken, key: key)
        }
        add(.accessToken, accessToken)
        saveRefreshToken(grant, context, hid: hid, granted: granted)
        if let identity = grant.idToken { saveIdentity(identity, grant, context, hid: hid, realm: realm) }
        // What the IdP said about this app's family: `foci` present = member, absent = outside (as msal-python).
        var metadata = CacheEntity()
        metadata.set("client_id", clientId)
        metadata.set("environment", environment)
        metadata.set("family_id", grant.familyId)
        add(.appMetadata, metadata)
        return SavedTokens(homeAccountId: hid, accessToken: accessToken, grantedScopes: granted, idToken: grant.idToken?.raw)
    }

    private mutating func saveRefreshToken(_ grant: TokenGrant, _ context: GrantContext, hid: String, granted: [String]) {
        guard let secret = grant.refreshToken else { return }
        if let usedKey = context.usedRefreshTokenKey, var used = entity(.refreshToken, key: usedKey) {
            used.set("secret", secret)
            used.setTimestamp("last_modification_time", context.now)
            put(.refreshToken, key: usedKey, used)
            return
        }
        var refreshToken = CacheEntity()
        refreshToken.set("credential_type", "RefreshToken")
        refreshToken.set("secret", secret)
        refreshToken.set("home_account_id", hid)
        refreshToken.set("environment", context.environment)
        refreshToken.set("client_id", context.clientId)
        refreshToken.set("target", granted.joined(separator: " "))
        refreshToken.set("family_id", grant.familyId)
        refreshToken.setTimestamp("last_modification_time", context.now)
        add(.refreshToken, refreshToken)
    }

    private mutating func saveIdentity(_ identity: TokenGrant.Identity, _ grant: TokenGrant, _ context: GrantContext,
                                       hid: String, realm: String) {
        if let raw = identity.raw {
            var idEntry = CacheEntity()
            idEntry.set("credential_type", "IdToken")
            idEntry.set("secret", raw)
            idEntry.set("home_account_id", hid)
            idEntry.set("environment", context.environment)
            idEntry.set("realm", realm)
            idEntry.set("client_id", context.clientId)
            add(.idToken, idEntry)
        }
        var account = CacheEntity()
        account.set("home_account_id", hid)
        account.set("environment", context.environment)
        account.set("realm", realm)
        account.set("local_account_id", identity.objectId ?? identity.subject)
        account.set("username", identity.username ?? "")
        account.set("authority_type", grant.clientInfoHomeAccountId != nil ? "MSSTS" : "Generic")
        account.set("name", identity.name)
        account.set("client_info", grant.clientInfo)
        add(.account, account)
    }
}
