/// Access tokens with less than this left are treated as expired (MSAL's 5-minute buffer).
public let expiryBufferSeconds: Int64 = 300

extension TokenCache {
    /// MSAL's access-token lookup (reference §3.2): an access token of this account, client and environment (alias
    /// group) whose scopes cover the request, with more than the 5-minute buffer left, in the requested tenant; the
    /// longest-lived wins. Read from the typed index (AccessTokenIndex.swift): the cost is that of the tokens this
    /// app holds for this account.
    ///
    /// `tenant` is the authority's tenant ("" for none): tokens of OIDC providers carry the authority's first path
    /// segment as realm, and the tenant aliases (common, organizations, consumers) stand for the home tenant.
    public func cachedAccessToken(homeAccountId hid: String, clientId: String, environment: String, tenant: String,
                                  scopes: [String], now: Int64) -> CacheEntity? {
        // No arithmetic on cached values (an imported cache can hold any number): `now + buffer` only.
        accessTokens.bestToken(homeAccountId: hid, clientId: clientId, environment: environment, tenant: tenant,
                               scopes: scopes, now: now, aliases: aliases)?.entity
    }

    /// Tenants that stand for the account's home tenant: a token of any realm answers them.
    static let tenantAliases: Set<String> = ["common", "organizations", "consumers"]

    /// `tenantAliases.contains`, ignoring case, hashing only a tenant of an alias's length: every hit asks, and its
    /// tenant is usually a GUID.
    static func isTenantAlias(_ tenant: String) -> Bool {
        Scopes.lengthMask(tenantAliasLengths, has: tenant) && tenantAliases.contains(tenant.lowercasedIfNeeded)
    }

    private static let tenantAliasLengths = Scopes.lengthMask(of: tenantAliases)

    /// The id_token of the account for this client in this environment stored last (what a token answer carries).
    public func latestIdToken(homeAccountId: String, environment: String, clientId: String) -> String? {
        indexedIdToken(homeAccountId: homeAccountId, clientId: clientId, environment: environment)
    }

    /// That id token with its `preferred_username` claim, from the claims decoded when the token was stored (kept in
    /// the id-token index): a front end that must check the claim (broker1's answer needs it) decodes nothing per answer.
    public func latestIdTokenAndUsername(homeAccountId: String, environment: String, clientId: String)
        -> (idToken: String, preferredUsername: String?)? {
        guard let entry = indexedIdTokenEntry(homeAccountId: homeAccountId, clientId: clientId, environment: environment),
              let secret = entry.secret else { return nil }
        return (secret, entry.preferredUsername)
    }

    /// A cache hit's tokens in one lookup: the access token `cachedAccessToken` finds, typed, and the id token (with
    /// its `preferred_username`) `latestIdTokenAndUsername` finds. The account and the client are looked up once for
    /// both, and no JSON field is read. `account`: the account as `resolveAccount` resolved it, which spares looking
    /// the id up again.
    public func cachedHitTokens(homeAccountId hid: String, account: CacheAccountRef? = nil, clientId: String,
                                environment: String, tenant: String, scopes: [String], now: Int64) -> HitTokens? {
        guard let bucket = account.map({ accessTokens.bucket(account: $0.number, clientId: clientId) })
                ?? accessTokens.bucket(homeAccountId: hid, clientId: clientId),
              let token = accessTokens.bestAnswer(in: bucket, environment: environment, tenant: tenant, scopes: scopes,
                                                  now: now, aliases: aliases) else { return nil }
        let idToken = idTokenAnswer(in: bucket, environment: environment)
        return HitTokens(accessToken: token, idToken: idToken?.secret, preferredUsername: idToken?.preferredUsername,
                         tokensNeedNoEscape: token.secretNeedsNoEscape && idToken?.secretNeedsNoEscape ?? true)
    }
}

/// What `cachedHitTokens` finds. A struct, not a tuple: an optional tuple was copied through the runtime's generic
/// tuple copy, a tenth of the lookup.
public struct HitTokens: Sendable {
    public var accessToken: CachedAccessToken
    public var idToken: String?
    /// The id token's `preferred_username` claim, decoded when it was stored.
    public var preferredUsername: String?
    /// Neither secret has a byte JSON escapes.
    public var tokensNeedNoEscape: Bool
}
