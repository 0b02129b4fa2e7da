import OAuth

/// A token as the broker hands it out.
public struct TokenOutcome: Sendable {
    public var accessToken: String
    public var tokenType: String
    public var expiresOn: Int64
    public var extendedExpiresOn: Int64
    public var refreshOn: Int64?
    public var grantedScopes: [String]
    public var idToken: String?
    public var homeAccountId: String
    public var authority: String
    /// `cache`, `refresh` or `interactive`.
    public var source: String
}

public struct SilentTokenRequest: Sendable {
    public var clientId: String
    public var authority: String?
    public var scopes: [String]
    public var account: AccountSelector
    public var forceRefresh: Bool
    public var claims: String?

    public init(clientId: String, authority: String?, scopes: [String], account: AccountSelector,
                forceRefresh: Bool = false, claims: String? = nil) {
        self.clientId = clientId
        self.authority = authority
        self.scopes = scopes
        self.account = account
        self.forceRefresh = forceRefresh
        self.claims = claims
    }
}

/// Access tokens with less than this left are treated as expired (MSAL's 5-minute buffer).
let expiryBufferSeconds: Int64 = 300

extension Broker {
    /// MSAL's silent algorithm (reference §3): a cached access token whose scopes cover the request and that has
    /// more than 5 minutes left; else a refresh-token redemption (shared by concurrent callers); else
    /// InteractionRequired. A token past `refresh_on` is renewed, and still returned if the IdP is unreachable.
    public func acquireTokenSilently(_ request: SilentTokenRequest) async throws(TokenFailure) -> TokenOutcome {
        try await acquireTokenSilently(request, countAsUse: true)
    }

    /// `countAsUse`: an app asked (the background refresh then keeps this token fresh); false for the
    /// background refresh's own requests.
    func acquireTokenSilently(_ request: SilentTokenRequest, countAsUse: Bool) async throws(TokenFailure) -> TokenOutcome {
        let idp = try identityProvider()
        let authority = try idp.authority(requested: request.authority, clientId: request.clientId)
        let hid: String
        do { hid = try cache.resolve(request.account) } catch {
            switch error {
            case .ambiguous: throw .invalidRequest(Failure.lookup(error).description, reason: "ambiguousAccount")
            case .notFound: throw .interactionRequired("no such account in the broker (\(request.account))", nil)
            }
        }
        if cache.state.isHidden(hid, from: request.clientId) {
            throw .interactionRequired("the account was removed from this app; sign in again", nil)
        }
        let scopes = Scopes.requested(request.scopes)
        guard !scopes.isEmpty || !request.scopes.isEmpty else {
            throw .invalidRequest("'scopes' must name at least one scope", reason: "missingScopes")
        }
        let now = Self.now()
        if countAsUse { noteUse(clientId: request.clientId, homeAccountId: hid, authority: authority.url, scopes: scopes, now: now) }
        var aging: TokenOutcome?
        if !request.forceRefresh, request.claims == nil,
           let cached = cachedAccessToken(hid: hid, clientId: request.clientId, authority: authority, scopes: scopes, now: now) {
            if let refreshOn = cached.refreshOn, refreshOn <= now {
                aging = cached
            } else {
                return cached
            }
        }
        do {
            return try await redeemRefreshToken(hid: hid, clientId: request.clientId, authority: authority, scopes: scopes,
                                                claims: request.claims, idp: idp)
        } catch {
            if case .unavailable = error, let aging {
                logger.notice("identity provider unreachable; returning the aging access token", metadata: ["client_id": "\(request.clientId)"])
                return aging
            }
            throw error
        }
    }

    func identityProvider() throws(TokenFailure) -> IdentityProvider {
        guard let identity else { throw .internal("token acquisition is not configured in this broker") }
        return identity
    }

    private func cachedAccessToken(hid: String, clientId: String, authority: Authority, scopes: [String], now: Int64) -> TokenOutcome? {
        let matches = cache.find(.accessToken, CacheQuery(homeAccountId: hid, environment: authority.environment,
                                                           clientId: clientId, scopes: scopes.isEmpty ? nil : scopes))
        // Realm: the account's tenant as stored; an authority that names a tenant must match it.
        let candidates = matches.filter { entry in
            (entry.entity.expiresOn ?? 0) - now > expiryBufferSeconds
                && (authority.tenant.isEmpty || realmMatches(entry.entity.realm, authority: authority, hid: hid))
        }
        guard let best = candidates.max(by: { ($0.entity.expiresOn ?? 0) < ($1.entity.expiresOn ?? 0) }) else { return nil }
        return outcome(best.entity, hid: hid, clientId: clientId, authority: authority, source: "cache")
    }

    private func realmMatches(_ realm: String?, authority: Authority, hid: String) -> Bool {
        let stored = (realm ?? "").lowercased(), tenant = authority.tenant.lowercased()
        if stored == tenant { return true }
        // Tokens of OIDC providers carry the authority's first path segment; tenant aliases (common,
        // organizations, consumers) stand for the account's home tenant.
        return ["common", "organizations", "consumers"].contains(tenant)
    }

    func outcome(_ token: CacheEntity, hid: String, clientId: String, authority: Authority, source: String,
                 idToken: String? = nil) -> TokenOutcome {
        TokenOutcome(
            accessToken: token.secret ?? "", tokenType: token.tokenType, expiresOn: token.expiresOn ?? 0,
            extendedExpiresOn: token.extendedExpiresOn ?? token.expiresOn ?? 0, refreshOn: token.refreshOn,
            grantedScopes: token.target,
            idToken: idToken ?? cache.latestIdToken(homeAccountId: hid, environment: authority.environment, clientId: clientId),
            homeAccountId: hid, authority: authority.url, source: source)
    }

    /// Redeems the newest refresh token of the account for this client; concurrent callers asking for the same
    /// thing share one request to the IdP.
    private func redeemRefreshToken(hid: String, clientId: String, authority: Authority, scopes: [String], claims: String?,
                                    idp: IdentityProvider) async throws(TokenFailure) -> TokenOutcome {
        let candidates = cache.find(.refreshToken, CacheQuery(homeAccountId: hid, environment: authority.environment, clientId: clientId))
            .sorted { ($0.entity.lastModificationTime ?? 0) > ($1.entity.lastModificationTime ?? 0) }
        guard let (rtKey, refreshToken) = candidates.first, let secret = refreshToken.secret else {
            throw .interactionRequired("no refresh token for this account and app; sign in interactively", nil)
        }
        let flightKey = ([rtKey, authority.url, claims ?? ""] + scopes.map { $0.lowercased() }.sorted()).joined(separator: "\n")
        if let running = refreshFlights[flightKey] {
            return try await Self.value(of: running)
        }
        let task = Task<TokenOutcome, Error> {
            let metadata = try await idp.metadata(authority)
            let response: TokenResponse
            do {
                response = try await idp.tokens.refresh(secret, clientId: clientId, scopes: Scopes.onTheWire(scopes),
                                                        claims: claims, metadata: metadata)
            } catch {
                throw await self.refreshFailed((error as? OAuthFailure) ?? .invalidResponse("\(error)"), hid: hid, clientId: clientId)
            }
            return try await self.refreshSucceeded(response, metadata: metadata, hid: hid, clientId: clientId,
                                                   authority: authority, scopes: scopes, rtKey: rtKey)
        }
        refreshFlights[flightKey] = task
        defer { refreshFlights[flightKey] = nil }
        return try await Self.value(of: task)
    }

    static func value(of task: Task<TokenOutcome, Error>) async throws(TokenFailure) -> TokenOutcome {
        do { return try await task.value } catch let failure as TokenFailure { throw failure } catch {
            throw .internal("\(error)")
        }
    }

    private func refreshSucceeded(_ response: TokenResponse, metadata: ProviderMetadata, hid: String, clientId: String,
                                  authority: Authority, scopes: [String], rtKey: String) async throws(TokenFailure) -> TokenOutcome {
        let now = Self.now()
        var idToken: IdToken?
        if let raw = response.idToken {
            do {
                let decoded = try IdToken(raw: raw)
                try decoded.validate(issuer: metadata.issuer, clientId: clientId, nonce: nil, now: now)
                idToken = decoded
            } catch {
                throw .serverError(error.description, nil)
            }
        }
        let saved = try cache.save(response, idToken: idToken, clientId: clientId, authority: authority,
                                   requestedScopes: scopes, usedRefreshTokenKey: rtKey, knownHomeAccountId: hid, now: now)
        if cache.state.signInRequired.remove(hid.lowercased()) != nil {
            logger.info("account no longer needs sign-in", metadata: ["account": "\(hid)"])
        }
        // The rotated refresh token must be on disk before anyone uses the answer: after a crash, the old one
        // would be a reuse, which makes the IdP revoke the whole chain.
        do { try await commit() } catch {
            logger.error("refreshed, but the rotated refresh token could not be written: \(error)")
        }
        try checkGranted(saved, requested: scopes)
        return outcome(saved.accessToken, hid: saved.homeAccountId, clientId: clientId, authority: authority,
                       source: "refresh", idToken: saved.idToken)
    }

    func checkGranted(_ saved: SavedTokens, requested: [String]) throws(TokenFailure) {
        let declined = Scopes.declined(requested: requested, granted: saved.grantedScopes)
        if !declined.isEmpty { throw .serverDeclinedScopes(granted: saved.grantedScopes, declined: declined) }
    }

    private func refreshFailed(_ error: OAuthFailure, hid: String, clientId: String) -> TokenFailure {
        let failure = TokenFailure.fromRefresh(error)
        if case .oauth(let response) = error, response.error == "invalid_grant" {
            // The refresh token is kept (it may still serve other scopes or tenants); the account is flagged.
            if cache.state.signInRequired.insert(hid.lowercased()).inserted {
                changed()
                emit(.signInRequired(homeAccountId: hid, clientId: clientId))
            }
            logger.warning("refresh token refused; the account needs sign-in", metadata: [
                "account": "\(hid)", "client_id": "\(clientId)", "error": "\(response.error)",
                "suberror": "\(response.suberror ?? "")",
            ])
        }
        return failure
    }
}
