import BrokerCache
internal import OAuth

/// Where an authority's endpoints come from when the network is away: what the network told brokerd last
/// (NetworkMemory, persisted with the cache). Within the discovery lifetime a remembered document is used without
/// asking; past it, the network is asked, and while the network fails the old document is used rather than none.
extension Broker {
    func providerMetadata(_ authority: Authority, idp: IdPClient) async throws(TokenFailure) -> ProviderMetadata {
        // Keyed by where the document really comes from: a test IdP on another port is another provider.
        let source = idp.networkURL(authority.discoveryBase)
        let remembered = cell.withLock { $0.cache.learned.fact(.discovery, source) }.flatMap { fact in
            (try? ProviderMetadata(json: Array(fact.value.utf8), source: source)).map { (fact: fact, metadata: $0) }
        }
        if let remembered, remembered.fact.isFresh(now: now(), lifetime: idp.settings.discoveryTTLSeconds) {
            await rememberTenant(of: authority, issuer: remembered.metadata.issuer)
            return remembered.metadata
        }
        do {
            let metadata = try await idp.metadata(authority)
            await remember(.discovery, source, value: metadata.json)
            await rememberTenant(of: authority, issuer: metadata.issuer)
            return metadata
        } catch {
            guard case .unavailable = error, let remembered else { throw error }
            logger.notice("identity provider unreachable; using the discovery document learned earlier", metadata: [
                "authority": "\(authority.url)", "learned_s_ago": "\(now() - remembered.fact.learnedAt)",
            ])
            return remembered.metadata
        }
    }

    /// A tenant named by its domain is filed under the tenant id its discovery document's issuer names.
    private func rememberTenant(of authority: Authority, issuer: String) async {
        guard authority.namesTenantByDomain, let tenantId = Authority.tenantId(inIssuer: issuer) else { return }
        await remember(.tenant, NetworkMemory.tenantSubject(environment: authority.environment, tenant: authority.tenant),
                       value: tenantId)
    }

    /// Instance discovery's alias groups of a cloud host, remembered (an empty answer is a failure: not kept).
    func rememberAliases(_ groups: [[String]], host: String) async {
        guard !groups.isEmpty else { return }
        await remember(.aliases, host, value: NetworkMemory.aliasValue(groups))
    }

    /// Stores a fact when it is new or changed (or older than a minute), and persists it. The check is a read under
    /// the cell's lock: a write through `cache` counts as a change that ends every remembered answer.
    private func remember(_ kind: NetworkMemory.Kind, _ subject: String, value: String) async {
        let now = now()
        let known = cell.withLock { $0.cache.learned.fact(kind, subject) }
        if let known, known.value == value, known.learnedAt <= now, now - known.learnedAt < 60 { return }
        await loaded()  // learned into a partial cache, it would be lost with it
        if cache.learn(kind, subject, value: value, at: now) { changed() }
    }
}
