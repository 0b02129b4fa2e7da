import BrokerCache
import BrokerCore
import BrokerJSON
import BrokerProtocol
import BrokerWire

/// How the socket front end writes the core's values on the wire: an account summary as an `Account`, a token
/// outcome as a `TokenResult` (encoded, or as the text a cache hit's answer is written from). Public so that the
/// benchmarks time the front end's own translation, not a copy of it.
public enum SocketWire {
    /// The account's text as a token result writes it (what the cache keeps with the account): its claims are
    /// written from their text, not read into a value and written again.
    public static func accountText(_ summary: AccountSummary) -> [UInt8]? {
        try? TokenResultText.accountJSON(account(summary, claims: nil), claimsText: summary.accountClaimsText)
    }

    public static func account(_ summary: AccountSummary) -> Account {
        account(summary, claims: summary.accountClaims.map(JSONValue.object))
    }

    private static func account(_ summary: AccountSummary, claims: JSONValue?) -> Account {
        Account(
            homeAccountId: summary.homeAccountId, username: summary.username, environment: summary.environment,
            realm: summary.realm, localAccountId: summary.localAccountId, name: summary.name,
            authorityType: summary.authorityType,
            tenantProfiles: summary.tenants.map {
                TenantProfile(realm: $0.realm, environment: $0.environment, localAccountId: $0.localAccountId, username: $0.username)
            },
            apps: summary.apps.map {
                AppTokens(clientId: $0.clientId, familyId: $0.familyId, hasRefreshToken: $0.hasRefreshToken,
                          accessTokens: $0.accessTokens.map { AccessTokenInfo(scopes: $0.scopes, realm: $0.realm, expiresOn: $0.expiresOn) })
            },
            hiddenFrom: summary.hiddenFrom, signInRequired: summary.signInRequired,
            accountClaims: claims)
    }

    public static func encodedTokenResult(_ outcome: TokenOutcome, account: AccountSummary, correlationId: String?) throws -> [UInt8] {
        try ProtocolCoding.encode(tokenResult(outcome, account: account, correlationId: correlationId))
    }

    /// A hit's answer text, with the account's text the cache kept (written here only when it has none).
    public static func tokenResultText(_ hit: borrowing CachedHit) -> TokenResultText? {
        guard let accountJSON = hit.accountText else { return nil }  // not writable: the full path reports why
        // Read where they lie (a copy of the outcome retained and released each of its strings once more).
        return TokenResultText(accessToken: hit.outcome.accessToken, tokenType: hit.outcome.tokenType,
                               expiresOn: hit.outcome.expiresOn, extendedExpiresOn: hit.outcome.extendedExpiresOn,
                               refreshOn: hit.outcome.refreshOn, grantedScopes: hit.outcome.grantedScopes,
                               idToken: hit.outcome.idToken, accountJSON: accountJSON, authority: hit.outcome.authority,
                               source: hit.outcome.source, tokensNeedNoEscape: hit.tokensNeedNoEscape)
    }

    public static func tokenResult(_ outcome: TokenOutcome, account: AccountSummary, correlationId: String?) -> TokenResult {
        TokenResult(
            accessToken: outcome.accessToken, tokenType: outcome.tokenType, expiresOn: outcome.expiresOn,
            extendedExpiresOn: outcome.extendedExpiresOn, refreshOn: outcome.refreshOn, grantedScopes: outcome.grantedScopes,
            idToken: outcome.idToken, account: Self.account(account), authority: outcome.authority, correlationId: correlationId,
            source: outcome.source)
    }
}
