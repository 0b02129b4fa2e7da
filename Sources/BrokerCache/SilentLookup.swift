/// Access tokens with less than this left are treated as expired (MSAL's 5-minute buffer).
public let expiryBufferSeconds: Int64 = 300

extension TokenCache {
    /// MSAL's access-token lookup (reference §3.2): an access token of this account, client and environment (alias
    /// group) whose scopes cover the request, with more than the 5-minute buffer left, in the requested tenant; the
    /// longest-lived wins. Found through the indexes: the cost is that of the account's own tokens.
    ///
    /// `tenant` is the authority's tenant ("" for none): tokens of OIDC providers carry the authority's first path
    /// segment as realm, and the tenant aliases (common, organizations, consumers) stand for the home tenant.
    public func cachedAccessToken(homeAccountId hid: String, clientId: String, environment: String, tenant: String,
                                  scopes: [String], now: Int64) -> CacheEntity? {
        let matches = find(.accessToken, CacheQuery(homeAccountId: hid, environment: environment, clientId: clientId,
                                                    scopes: scopes.isEmpty ? nil : scopes))
        var best: CacheEntity?
        for (_, entity) in matches {
            // No arithmetic on cached values: an imported cache can hold any number.
            guard let expiresOn = entity.expiresOn, expiresOn > now + expiryBufferSeconds,
                  tenant.isEmpty || Self.realm(entity.realm, matches: tenant) else { continue }
            if (best?.expiresOn ?? Int64.min) < expiresOn { best = entity }
        }
        return best
    }

    static func realm(_ realm: String?, matches tenant: String) -> Bool {
        let stored = (realm ?? "").lowercased(), wanted = tenant.lowercased()
        return stored == wanted || ["common", "organizations", "consumers"].contains(wanted)
    }

    /// The newest id_token of the account for this client in this environment (what a token answer carries).
    public func latestIdToken(homeAccountId: String, environment: String, clientId: String) -> String? {
        find(.idToken, CacheQuery(homeAccountId: homeAccountId, environment: environment, clientId: clientId)).first?.entity.secret
    }
}
