import BrokerCache
import BrokerJSON
import OAuth

/// What a saved token response gives the caller.
struct SavedTokens: Sendable {
    var homeAccountId: String
    var accessToken: CacheEntity
    var grantedScopes: [String]
    var idToken: String?
}

extension TokenCache {
    /// Files an IdP response as MSAL would: the access token (replacing this client's tokens whose scopes
    /// intersect it), the refresh token (rotated in place when `usedRefreshTokenKey` names the one redeemed, so
    /// a family token keeps its owner), and, when an id_token came, the IdToken, Account and AppMetadata entries.
    mutating func save(_ response: TokenResponse, idToken: IdToken?, clientId: String, authority: Authority,
                       requestedScopes: [String], usedRefreshTokenKey: String?, knownHomeAccountId: String?,
                       now: Int64) throws(TokenFailure) -> SavedTokens {
        let clientInfo = response.clientInfo.flatMap(ClientInfo.init(encoded:))
        guard let hid = clientInfo?.homeAccountId ?? idToken?.subject ?? knownHomeAccountId else {
            throw .serverError("the token response identifies no account (no client_info, no id_token sub)", nil)
        }
        let environment = authority.environment
        let realm = idToken?.tenantId ?? authority.tenant
        let granted = response.scope.map(Scopes.split) ?? requestedScopes

        var accessToken = CacheEntity()
        accessToken.set("credential_type", "AccessToken")
        accessToken.set("secret", response.accessToken)
        accessToken.set("home_account_id", hid)
        accessToken.set("environment", environment)
        accessToken.set("client_id", clientId)
        accessToken.set("realm", realm)
        accessToken.set("target", granted.joined(separator: " "))
        accessToken.set("token_type", response.tokenType)
        accessToken.setTimestamp("cached_at", now)
        // Lifetimes are clamped to ten years, so an absurd expires_in cannot overflow.
        func after(_ seconds: Int64) -> Int64 { now + min(max(seconds, 0), 10 * 365 * 86_400) }
        accessToken.setTimestamp("expires_on", after(response.expiresIn))
        accessToken.setTimestamp("extended_expires_on", after(response.extExpiresIn ?? response.expiresIn))
        accessToken.setTimestamp("refresh_on", response.refreshIn.map(after))
        // The OIDC scopes (openid, profile, offline_access) are in almost every token's scope: counting them as an
        // overlap would make two apps' tokens of one client evict each other on every refresh.
        func resourceScopes(_ scopes: [String]) -> Set<String> { Set(scopes.map { $0.lowercased() }).subtracting(Scopes.reserved) }
        let grantedSet = resourceScopes(granted)
        for (key, old) in find(.accessToken, CacheQuery(homeAccountId: hid, environment: environment, clientId: clientId, realm: realm))
        where !grantedSet.isDisjoint(with: resourceScopes(old.target)) {
            remove(.accessToken, key: key)
        }
        add(.accessToken, accessToken)

        if let secret = response.refreshToken {
            if let usedKey = usedRefreshTokenKey, var used = entity(.refreshToken, key: usedKey) {
                used.set("secret", secret)
                used.setTimestamp("last_modification_time", now)
                put(.refreshToken, key: usedKey, used)
            } else {
                var refreshToken = CacheEntity()
                refreshToken.set("credential_type", "RefreshToken")
                refreshToken.set("secret", secret)
                refreshToken.set("home_account_id", hid)
                refreshToken.set("environment", environment)
                refreshToken.set("client_id", clientId)
                refreshToken.set("target", granted.joined(separator: " "))
                refreshToken.set("family_id", response.familyId)
                refreshToken.setTimestamp("last_modification_time", now)
                add(.refreshToken, refreshToken)
            }
        }

        if let idToken {
            if let raw = idToken.raw {
                var idEntry = CacheEntity()
                idEntry.set("credential_type", "IdToken")
                idEntry.set("secret", raw)
                idEntry.set("home_account_id", hid)
                idEntry.set("environment", environment)
                idEntry.set("realm", realm)
                idEntry.set("client_id", clientId)
                add(.idToken, idEntry)
            }

            var account = CacheEntity()
            account.set("home_account_id", hid)
            account.set("environment", environment)
            account.set("realm", realm)
            account.set("local_account_id", idToken.objectId ?? idToken.subject)
            account.set("username", idToken.username ?? "")
            account.set("authority_type", clientInfo != nil ? "MSSTS" : "Generic")
            account.set("name", idToken.name)
            account.set("client_info", response.clientInfo)
            add(.account, account)
        }
        // What the IdP said about this app's family: `foci` present = member, absent = outside (as msal-python).
        var metadata = CacheEntity()
        metadata.set("client_id", clientId)
        metadata.set("environment", environment)
        metadata.set("family_id", response.familyId)
        add(.appMetadata, metadata)
        return SavedTokens(homeAccountId: hid, accessToken: accessToken, grantedScopes: granted, idToken: idToken?.raw)
    }
}
