import BrokerCache
internal import OAuth

extension TokenGrant {
    /// An IdP's response and its checked id_token, as the cache files them (`TokenCache.save`).
    init(_ response: TokenResponse, idToken: IdToken?) {
        self.init(accessToken: response.accessToken, tokenType: response.tokenType, expiresIn: response.expiresIn,
                  extExpiresIn: response.extExpiresIn, refreshIn: response.refreshIn,
                  grantedScopes: response.scope.map(Scopes.split), refreshToken: response.refreshToken,
                  familyId: response.familyId, clientInfo: response.clientInfo,
                  clientInfoHomeAccountId: response.clientInfo.flatMap(ClientInfo.init(encoded:))?.homeAccountId,
                  idToken: idToken.map {
                      Identity(raw: $0.raw, subject: $0.subject, objectId: $0.objectId, tenantId: $0.tenantId,
                               username: $0.username, name: $0.name)
                  })
    }
}

extension TokenCache {
    /// `save(_:_:)` for a response of the token engine, under `authority`.
    mutating func save(_ response: TokenResponse, idToken: IdToken?, clientId: String, authority: Authority,
                       requestedScopes: [String], usedRefreshTokenKey: String?, knownHomeAccountId: String?,
                       now: Int64) throws(TokenFailure) -> SavedTokens {
        let context = GrantContext(clientId: clientId, environment: authority.environment, tenant: authority.tenant,
                                   requestedScopes: requestedScopes, usedRefreshTokenKey: usedRefreshTokenKey,
                                   knownHomeAccountId: knownHomeAccountId, now: now)
        do {
            return try save(TokenGrant(response, idToken: idToken), context)
        } catch {
            throw .serverError("the token response identifies no account (no client_info, no id_token sub)", nil)
        }
    }
}
