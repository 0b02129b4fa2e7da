import BrokerCache
import BrokerJSON
internal import OAuth

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

/// A silent request answered from the cache on the caller's thread (`Broker.cachedSilentToken`).
public struct CachedHit: Sendable {
    public var outcome: TokenOutcome
    /// The username of the token's account (what the app policy and the audit read).
    public var username: String
    /// The account as the front end's `accountText` wrote it, made once per change of the account, not per hit.
    public var accountText: [UInt8]?
    /// For a front end that keeps the answer it made from this hit: when the same request gets the same answer.
    public var freshness: HitFreshness
    /// The `preferred_username` claim of `outcome.idToken`, decoded when the id token was stored.
    public var idTokenUsername: String?
    /// Neither token has a byte that JSON escapes (checked when they were stored): an answer may send them as they are.
    public var tokensNeedNoEscape: Bool

    /// The request's scopes as the lookup read them (`Scopes.requested`): what the app policy and the audit see.
    public var requestedScopes: [String] { freshness.use.scopes }
}

extension CachedHit {
    /// The hit `readHit` and `cachedHit` both give, made under the lock: its strings are moved into place once.
    /// (Taken out of the lock as another struct and copied into this one after, each hit retained and released its
    /// strings twice more.)
    fileprivate init(_ tokens: consuming HitTokens, plan: borrowing Broker.SilentPlan, use: consuming TokenUse,
                     generation: UInt64, username: String, text: [UInt8]?) {
        let token = tokens.accessToken
        let until = min(token.expiresOn - expiryBufferSeconds, token.refreshOn ?? .max)
        self.init(outcome: TokenOutcome(accessToken: token.secret, tokenType: token.tokenType, expiresOn: token.expiresOn,
                                        extendedExpiresOn: token.extendedExpiresOn, refreshOn: token.refreshOn,
                                        grantedScopes: token.target, idToken: tokens.idToken, homeAccountId: plan.hid,
                                        authority: plan.authority.url, source: "cache"),
                  username: username, accountText: text,
                  freshness: HitFreshness(generation: generation, until: until, use: use),
                  idTokenUsername: tokens.preferredUsername, tokensNeedNoEscape: tokens.tokensNeedNoEscape)
    }
}

/// How long a cache hit's answer stays the answer (`Broker.isStillFresh`): opaque to front ends.
public struct HitFreshness: Sendable {
    let generation: UInt64
    /// Unix seconds: the hit holds while the clock is below this (the 5-minute buffer, `refresh_on`).
    let until: Int64
    var use: TokenUse
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

extension Broker {
    /// MSAL's silent algorithm (reference §3): a cached access token whose scopes cover the request and that has
    /// more than 5 minutes left; else a refresh-token redemption (shared by concurrent callers); else
    /// InteractionRequired. A token past `refresh_on` is renewed, and still returned if the IdP is unreachable.
    public func acquireTokenSilently(_ request: SilentTokenRequest) async throws(TokenFailure) -> TokenOutcome {
        try await acquireTokenSilently(request, countAsUse: true)
    }

    /// A cache hit answered on the caller's thread, without the actor: the outcome and its account, or nil when the
    /// request needs `acquireTokenSilently` (no usable token, a refresh due, claims or forceRefresh, a tenant named by
    /// its domain, any error to report). For a hit, both give the same answer: they share `plan` and the cache
    /// lookup; the first hit on an Entra host starts its alias lookup, as the full path would. Costs the account's own
    /// tokens, whatever the cache size. While the cache loads (`open`), the account is read on its own first, and
    /// only an account named by its home account id is answered.
    ///
    /// `accountText`: how the front end writes an account into its answer; the hit carries the account so written,
    /// kept with the account's memoized summary (TokenCache.memoizedAccount).
    public nonisolated func cachedSilentToken(_ request: SilentTokenRequest,
                                              accountText: (@Sendable (AccountSummary) -> [UInt8]?)? = nil) -> CachedHit? {
        guard !request.forceRefresh, request.claims == nil else { return nil }
        let now = now()
        // As a reader first: once its memos are made, a hit writes nothing; its use, once a minute, waits for the
        // next writer.
        let read = cell.withReadLock { readHit(request, now: now, accountText: accountText, in: $0) }
        switch consume read {
        case .hit(let hit, let use):
            if let use { cell.noteUseLater(use) }
            return hit
        case .none: return nil
        case .needsWriter: break
        }
        switch cell.withLock({ cachedHit(request, now: now, accountText: accountText, in: &$0) }) {
        case .hit(let hit): return hit
        case .none: return nil
        case .unread(let account):
            // While the cache loads: the account's rows are read outside the lock, then the lookup is made again.
            guard let rows = cell.withLock({ $0.partial?.reader }).flatMap({ $0.rows(ofAccount: account) }) else { return nil }
            return cell.withLock { contents -> CachedHit? in
                if var partial = contents.partial, !partial.hasRead(account) {
                    contents.partial = nil  // no second copy of the assembler while it changes
                    contents.cache = partial.add(rows, of: account)
                    contents.partial = partial
                    contents.cacheChanged()
                }
                guard case .hit(let hit) = cachedHit(request, now: now, accountText: accountText, in: &contents) else { return nil }
                return hit
            }
        }
    }

    fileprivate enum CachedLookup {
        case hit(CachedHit)
        case none
        /// The cache is still loading and this account has not been read yet (`CacheStore.account(of:)`).
        case unread(String)
    }

    fileprivate enum ReadLookup {
        /// The hit, and its use when the cache has not noted it within `TokenCache.hitUseResolution`.
        case hit(CachedHit, use: TokenUse?)
        case none
        /// The hit needs a write before it can be answered: a memo to make (the authority, the account's text), an
        /// alias lookup to start, or an account still to read while the cache loads. `cachedHit` does it all.
        case needsWriter
    }

    /// `cachedHit` as a reader: the same lookups, in the same order, answered only when every memo the hit reads is
    /// made (the usual case: they are made by an account's first hit). Keep the two in step.
    private nonisolated func readHit(_ request: SilentTokenRequest, now: Int64, accountText: ((AccountSummary) -> [UInt8]?)?,
                                     in contents: borrowing CacheCell.Contents) -> ReadLookup {
        guard contents.partial == nil, let known = contents.knownAuthority(request) else { return .needsWriter }
        guard let authority = known,
              let plan = try? Self.plan(request, authority: authority, cache: contents.cache),
              !plan.needsTenantDiscovery,
              let tokens = contents.cache.cachedHitTokens(
                  homeAccountId: plan.hid, account: plan.account, clientId: request.clientId,
                  environment: plan.authority.environment, tenant: plan.authority.tenant, scopes: plan.scopes, now: now),
              tokens.accessToken.refreshOn.map({ $0 > now }) ?? true
        else { return .none }
        guard let (username, text) = contents.cache.keptAccountText(homeAccountId: plan.hid, account: plan.account,
                                                                   withText: accountText != nil)
        else { return .needsWriter }
        if plan.authority.kind == .entra, contents.identity != nil {
            guard let retryAfter = contents.aliasLookups[DigestHashed(plan.authority.host)], retryAfter > elapsed() else {
                return .needsWriter
            }
        }
        let use = TokenUse(clientId: request.clientId, homeAccountId: plan.hid, authority: plan.authority.url,
                           scopes: plan.scopes, lastUsed: now)
        let unnoted = contents.cache.isNoted(use) ? nil : use  // a copy only for a use to note (once a minute)
        return .hit(CachedHit(tokens, plan: plan, use: use, generation: contents.generation, username: username,
                              text: text),
                    use: unnoted)
    }

    private nonisolated func cachedHit(_ request: SilentTokenRequest, now: Int64, accountText: TokenCache.AccountTextEncoder?,
                                       in contents: inout CacheCell.Contents) -> CachedLookup {
        var request = request
        if let partial = contents.partial {
            // Only a home account id names an account in a partial cache: a username could belong to one not read yet.
            let id: String
            switch request.account {
            case .homeAccountId(let text), .either(let text): id = text
            case .username: return .none
            }
            let account = CacheStore.account(of: id)
            guard partial.hasRead(account) else { return .unread(account) }
            request.account = .homeAccountId(id)
        }
        guard let authority = contents.validatedAuthority(request),
              let plan = try? Self.plan(request, authority: authority, cache: contents.cache),
              !plan.needsTenantDiscovery,
              let tokens = contents.cache.cachedHitTokens(
                  homeAccountId: plan.hid, account: plan.account, clientId: request.clientId,
                  environment: plan.authority.environment, tenant: plan.authority.tenant, scopes: plan.scopes, now: now),
              tokens.accessToken.refreshOn.map({ $0 > now }) ?? true,
              let (username, text) = contents.cache.memoizedAccountText(homeAccountId: plan.hid, account: plan.account,
                                                                        text: accountText)
        else { return .none }
        if plan.authority.kind == .entra, let identity = contents.identity,
           Self.startsAliasLookup(of: plan.authority, now: elapsed(), wallNow: now, in: &contents) {
            Task { await self.learned(await identity.aliasGroups(plan.authority), host: plan.authority.host) }
        }
        let use = TokenUse(clientId: request.clientId, homeAccountId: plan.hid, authority: plan.authority.url,
                           scopes: plan.scopes, lastUsed: now)
        contents.cache.noteUse(use)
        return .hit(CachedHit(tokens, plan: plan, use: use, generation: contents.generation, username: username,
                              text: text))
    }

    /// Whether a hit's answer is still the answer, and if so, the hit is noted as a use (at most once a second, the
    /// resolution of `lastUsed`). It is while nothing has changed the cache or the identity settings since it was
    /// made (a refresh, an import, a removal, a sign-out, a reload all do), and its token is neither inside the
    /// 5-minute buffer nor past `refresh_on`: exactly when `cachedSilentToken` would give it again.
    public nonisolated func isStillFresh(_ freshness: inout HitFreshness) -> Bool {
        let now = now()
        guard cell.generation == freshness.generation, now < freshness.until else { return false }
        // The use is noted once a second per remembered answer: only then is the lock taken.
        guard now != freshness.use.lastUsed else { return true }
        freshness.use.lastUsed = now
        return cell.withLock { contents in
            guard contents.generation == freshness.generation else { return false }
            contents.cache.noteUse(freshness.use)
            return true
        }
    }

    /// What a silent request names once resolved, before any I/O: the validated authority (a tenant alias becomes
    /// the account's home tenant, as in MSAL), the account, and the scopes.
    struct SilentPlan {
        var hid: String
        /// The account as the cache resolved it: the hit's lookups use it instead of the id.
        var account: CacheAccountRef
        var authority: Authority
        var scopes: [String]

        /// A tenant named by its domain whose tenant id brokerd has not learned yet (`plan` uses a learned one).
        var needsTenantDiscovery: Bool { authority.namesTenantByDomain }
    }

    /// `requested` is consumed: a hit's authority, copied out of the memo, is moved into the plan, not copied again
    /// (an authority holds five strings, each retained per copy).
    static func plan(_ request: SilentTokenRequest, authority requested: consuming Authority,
                     cache: TokenCache) throws(TokenFailure) -> SilentPlan {
        var authority = requested
        let (hid, account): (String, CacheAccountRef)
        do { (hid, account) = try cache.resolveAccount(request.account) } catch {
            switch error {
            case .ambiguous: throw .invalidRequest(Failure.lookup(error).description, reason: .ambiguousAccount)
            case .notFound: throw .interactionRequired("no such account in the broker (\(request.account))", nil)
            }
        }
        if cache.state.isHidden(hid, from: request.clientId) {
            throw .interactionRequired("the account was removed from this app; sign in again", nil)
        }
        // The home tenant, the utid of "<uid>.<utid>", found by bytes (a Character split of the id cost a hit on
        // /common as much as the rest of its lookup).
        if authority.isTenantAlias, hid.utf8.contains(UInt8(ascii: ".")),
           let homeTenant = TokenCache.lastDotComponent(hid) {
            authority = authority.withTenant(homeTenant)
        } else if authority.namesTenantByDomain,
                  let tenantId = cache.learned.tenantId(environment: authority.environment, tenant: authority.tenant) {
            // Learned from the tenant's discovery document, once: offline, a tenant name costs nothing more.
            authority = authority.withTenant(tenantId)
        }
        let scopes = Scopes.requested(request.scopes)
        guard !scopes.isEmpty || !request.scopes.isEmpty else {
            throw .invalidRequest("'scopes' must name at least one scope", reason: .missingScopes)
        }
        return SilentPlan(hid: hid, account: account, authority: authority, scopes: scopes)
    }

    /// `countAsUse`: an app asked (the background refresh then keeps this token fresh); false for the
    /// background refresh's own requests.
    func acquireTokenSilently(_ request: SilentTokenRequest, countAsUse: Bool) async throws(TokenFailure) -> TokenOutcome {
        let idp = try identityProvider()
        var plan = try Self.plan(request, authority: try idp.authority(requested: request.authority, clientId: request.clientId),
                                 cache: cache)
        learnAliases(of: plan.authority, idp: idp)
        // Without the tenant id from discovery (cached), the domain is used as it is.
        if plan.needsTenantDiscovery, let metadata = try? await providerMetadata(plan.authority, idp: idp),
           let tenantId = Authority.tenantId(inIssuer: metadata.issuer) {
            plan.authority = plan.authority.withTenant(tenantId)
        }
        let (hid, authority, scopes) = (plan.hid, plan.authority, plan.scopes)
        let now = now()
        if countAsUse {
            cache.noteUse(TokenUse(clientId: request.clientId, homeAccountId: hid, authority: authority.url, scopes: scopes, lastUsed: now))
        }
        var aging: TokenOutcome?
        if !request.forceRefresh, request.claims == nil,
           let token = cache.cachedAccessToken(homeAccountId: hid, clientId: request.clientId, environment: authority.environment,
                                               tenant: authority.tenant, scopes: scopes, now: now) {
            let cached = Self.outcome(token, hid: hid, clientId: request.clientId, authority: authority, source: "cache", cache: cache)
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

    /// Instance discovery's alias groups of an Entra cloud, so lookups match every alias's entries. Asked in the
    /// background, once per host: a request never waits for it, and what is built in already covers Microsoft's
    /// clouds. A failed lookup is asked again on a slow-path request after `aliasRetrySeconds`, not on every request.
    func learnAliases(of authority: Authority, idp: IdPClient) {
        guard authority.kind == .entra else { return }
        let now = elapsed()
        let wallNow = self.now()
        guard cell.withLock({ Self.startsAliasLookup(of: authority, now: now, wallNow: wallNow, in: &$0) }) else { return }
        Task {
            let groups = await idp.aliasGroups(authority)
            await self.learned(groups, host: authority.host)
        }
    }

    /// Whether a lookup of the host's aliases is to start now (none asked yet, or the last failed long enough ago);
    /// if so, it is marked as running. `now` is `elapsed()`, as the retry times are: a Unix time here made every hit
    /// after a failed lookup start a task and call the discovery actor (which keeps the failure a minute, so no request
    /// went out), a twentieth of a varied hit's time.
    private static func startsAliasLookup(of authority: Authority, now: Int64, wallNow: Int64,
                                          in contents: inout CacheCell.Contents) -> Bool {
        let host = DigestHashed(authority.host)
        if let retryAfter = contents.aliasLookups[host], retryAfter > now { return false }
        // Groups learned within the discovery lifetime (persisted: perhaps by an earlier run) are not asked again
        // until it ends: a restart offline must not start with a request that cannot get through.
        if contents.aliasLookups[host] == nil, let lifetime = contents.identity?.settings.discoveryTTLSeconds,
           let fact = contents.cache.learned.fact(.aliases, authority.host), fact.isFresh(now: wallNow, lifetime: lifetime) {
            contents.aliasLookups[host] = now + lifetime - (wallNow - fact.learnedAt)
            return false
        }
        contents.aliasLookups[host] = Int64.max
        return true
    }

    static let aliasRetrySeconds: Int64 = 300

    private func learned(_ groups: [[String]], host: String) async {
        await loaded()  // aliases learned into a partial cache would be lost with it
        if groups.isEmpty {
            let retryAfter = elapsed() + Self.aliasRetrySeconds
            cell.withLock { $0.aliasLookups[DigestHashed(host)] = retryAfter }
        }
        if !groups.isEmpty, cache.learnAliases(groups) {
            logger.debug("learned host aliases", metadata: ["host": "\(host)"])
        }
        await rememberAliases(groups, host: host)
    }

    func identityProvider() throws(TokenFailure) -> IdPClient {
        guard let identity else { throw .internal("token acquisition is not configured in this broker") }
        return identity
    }

    static func outcome(_ token: CacheEntity, hid: String, clientId: String, authority: Authority, source: String,
                        idToken: String? = nil, cache: TokenCache) -> TokenOutcome {
        TokenOutcome(
            accessToken: token.secret ?? "", tokenType: token.tokenType, expiresOn: token.expiresOn ?? 0,
            extendedExpiresOn: token.extendedExpiresOn ?? token.expiresOn ?? 0, refreshOn: token.refreshOn,
            grantedScopes: token.target,
            idToken: idToken ?? cache.latestIdToken(homeAccountId: hid, environment: authority.environment, clientId: clientId),
            homeAccountId: hid, authority: authority.url, source: source)
    }
    /// MSAL's refresh-token selection (reference §3.4): a family (FOCI) refresh token first when this app is in the
    /// family or not known to be outside it, then the app's own. A family token refused with `client_mismatch`
    /// records the app as outside the family. Concurrent callers asking for the same thing share one request.
    private func redeemRefreshToken(hid: String, clientId: String, authority: Authority, scopes: [String], claims: String?,
                                    idp: IdPClient) async throws(TokenFailure) -> TokenOutcome {
        func newestFirst(_ query: CacheQuery) -> [(key: String, entity: CacheEntity)] {
            cache.find(.refreshToken, query).sorted { ($0.entity.lastModificationTime ?? 0) > ($1.entity.lastModificationTime ?? 0) }
        }
        let own = newestFirst(CacheQuery(homeAccountId: hid, environment: authority.environment, clientId: clientId))
        var lastFailure: TokenFailure?
        if appFamily(clientId, environment: authority.environment) != .outside {
            let family = newestFirst(CacheQuery(homeAccountId: hid, environment: authority.environment, familyId: "1"))
                .filter { candidate in !own.contains { $0.key == candidate.key } }
            if let (key, token) = family.first, let secret = token.secret {
                do {
                    return try await redeem(secret, rtKey: key, family: true, hid: hid, clientId: clientId,
                                            authority: authority, scopes: scopes, claims: claims, idp: idp)
                } catch {
                    if case .unavailable = error { throw error }
                    lastFailure = error
                }
            }
        }
        guard let (key, token) = own.first, let secret = token.secret else {
            if let lastFailure, case .interactionRequired = lastFailure { throw lastFailure }
            throw .interactionRequired("no refresh token for this account and app; sign in interactively", lastFailure?.oauth)
        }
        return try await redeem(secret, rtKey: key, family: false, hid: hid, clientId: clientId, authority: authority,
                                scopes: scopes, claims: claims, idp: idp)
    }

    enum FamilyMembership { case unknown, member, outside }

    /// From AppMetadata: absent = unknown; with a family_id = member; present without = outside the family.
    func appFamily(_ clientId: String, environment: String) -> FamilyMembership {
        let entries = cache.find(.appMetadata, CacheQuery(environment: environment, clientId: clientId))
        guard let metadata = entries.first?.entity else { return .unknown }
        return metadata.familyId == nil ? .outside : .member
    }

    private func redeem(_ secret: String, rtKey: String, family: Bool, hid: String, clientId: String, authority: Authority,
                        scopes: [String], claims: String?, idp: IdPClient) async throws(TokenFailure) -> TokenOutcome {
        let flightKey = ([clientId, rtKey, authority.url, claims ?? ""] + scopes.map { $0.lowercased() }.sorted()).joined(separator: "\n")
        if let running = refreshFlights[flightKey] {
            return try await Self.value(of: running)
        }
        let wireClaims = Claims.merged(challenge: claims, capabilities: idp.settings.clientCapabilities)
        let task = Task<TokenOutcome, Error> {
            let metadata = try await self.providerMetadata(authority, idp: idp)
            let response: TokenResponse
            do {
                response = try await idp.tokens.refresh(secret, clientId: clientId, scopes: Scopes.onTheWire(scopes),
                                                        claims: wireClaims, metadata: metadata)
            } catch {
                throw self.refreshFailed((error as? OAuthFailure) ?? .invalidResponse("\(error)"), hid: hid,
                                         clientId: clientId, rtKey: rtKey, secret: secret, family: family)
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
        let now = now()
        var idToken: IdToken?
        if let raw = response.idToken {
            // The redeemed refresh token is spent once the IdP has answered, and this answer holds its successor:
            // an id_token that fails the checks (a local clock minutes behind is enough) costs only the id_token.
            // Failing here would lose the rotation, and an IdP with reuse detection then revokes the whole chain.
            do {
                let decoded = try IdToken(raw: raw)
                try decoded.validate(issuer: metadata.issuer, clientId: clientId, nonce: nil, now: now)
                idToken = decoded
            } catch {
                logger.warning("refresh: the id_token was dropped, the tokens kept",
                               metadata: ["account": "\(hid)", "client_id": "\(clientId)", "reason": "\(error.description)"])
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
        emit(.tokenRefreshed(homeAccountId: saved.homeAccountId, clientId: clientId, authority: authority.url))
        try checkGranted(saved, requested: scopes)
        return Self.outcome(saved.accessToken, hid: saved.homeAccountId, clientId: clientId, authority: authority,
                            source: "refresh", idToken: saved.idToken, cache: cache)
    }

    func checkGranted(_ saved: SavedTokens, requested: [String]) throws(TokenFailure) {
        let declined = Scopes.declined(requested: requested, granted: saved.grantedScopes)
        if !declined.isEmpty { throw .serverDeclinedScopes(granted: saved.grantedScopes, declined: declined) }
    }

    private func refreshFailed(_ error: OAuthFailure, hid: String, clientId: String, rtKey: String, secret: String,
                               family: Bool) -> TokenFailure {
        let failure = TokenFailure.fromRefresh(error)
        guard case .oauth(let response) = error, response.error == "invalid_grant" else { return failure }
        if family && response.suberror == "client_mismatch" {
            // This app is not in the family: remember it, and use only its own refresh tokens from now on.
            var metadata = CacheEntity()
            metadata.set("client_id", clientId)
            metadata.set("environment", cache.entity(.refreshToken, key: rtKey)?.environment)
            cache.add(.appMetadata, metadata)
            changed()
            logger.info("app is not in the token family", metadata: ["client_id": "\(clientId)"])
            return failure
        }
        if response.suberror == "bad_token", cache.entity(.refreshToken, key: rtKey)?.secret == secret {
            // MSAL removes a refresh token only for invalid_grant + bad_token (and only the one it used).
            cache.remove(.refreshToken, key: rtKey)
            changed()
        }
        if family { return failure }
        // The refresh token is kept otherwise (it may still serve other scopes or tenants); the account is flagged.
        if cache.state.signInRequired.insert(hid.lowercased()).inserted {
            changed()
            emit(.signInRequired(homeAccountId: hid, clientId: clientId))
        }
        logger.warning("refresh token refused; the account needs sign-in", metadata: [
            "account": "\(hid)", "client_id": "\(clientId)", "error": "\(response.error)",
            "suberror": "\(response.suberror ?? "")",
        ])
        return failure
    }
}
