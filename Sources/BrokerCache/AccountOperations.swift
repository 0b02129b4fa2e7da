import BrokerJSON

/// Account-level operations on the cache: listing, lookup, per-app removal, sign-out, import and export.
/// The semantics follow SPEC §2 (removal is per app; sign-out is everywhere).
extension TokenCache {
    // MARK: Listing and lookup

    /// Every account, grouped by home account; with `clientId`, only those not removed from that client.
    public func accountSummaries(visibleTo clientId: String? = nil, now: Int64) -> [AccountSummary] {
        var groups: [String: [CacheEntity]] = [:]
        for (_, entity) in all(.account) {
            guard let hid = entity.homeAccountId, !hid.isEmpty else { continue }
            groups[hid.lowercased(), default: []].append(entity)
        }
        return groups.keys.sorted().compactMap { hid in
            if let clientId, state.isHidden(hid, from: clientId) { return nil }
            return summary(homeAccountId: hid, accountEntries: groups[hid]!, now: now)
        }.sorted { ($0.username.lowercased(), $0.homeAccountId) < ($1.username.lowercased(), $1.homeAccountId) }
    }

    /// One account's summary, from its own entries only (a token answer carries it: its cost must not grow with
    /// the number of accounts). nil when no Account entry has this home account id.
    public func accountSummary(homeAccountId hid: String, now: Int64) -> AccountSummary? {
        let entries = find(.account, CacheQuery(homeAccountId: hid)).map(\.entity)
        guard !entries.isEmpty else { return nil }
        return summary(homeAccountId: hid.lowercasedIfNeeded, accountEntries: entries, now: now)
    }

    private func summary(homeAccountId hid: String, accountEntries: [CacheEntity], now: Int64) -> AccountSummary {
        // The home tenant is the utid half of "<uid>.<utid>"; its profile is the primary one. Built once per account
        // and change (`memoizedAccount`), on the first hit of the account: bytes, not Characters, and no lowercased
        // copies (a grapheme split of the id, a split of each token's target and a copy of each app's list of tokens
        // at each token made this most of that first hit).
        let homeTenant = Self.lastDotComponent(hid)
        let entries = accountEntries.sorted { ($0.realm ?? "") < ($1.realm ?? "") }
        let primary = entries.first { entry in
            switch (entry.realm, homeTenant) {
            case let (realm?, tenant?): Self.equalIgnoringCase(realm, tenant)
            case (nil, nil): true
            default: false
            }
        } ?? entries[0]

        var apps: [String: AccountSummary.AppTokens] = [:]
        for (_, rt) in find(.refreshToken, CacheQuery(homeAccountId: hid)) {
            guard let client = rt.clientId?.lowercasedIfNeeded else { continue }
            apps[client, default: .init(client)].hasRefreshToken = true
            if apps[client]!.familyId == nil { apps[client]!.familyId = rt.familyId }
        }
        let account = accessTokens.strings.number(of: hid)
        let tokensByClient = account.map { accessTokens.summaryTokens(ofAccount: $0) } ?? []
        for (client, tokens) in tokensByClient { apps[client, default: .init(client)].accessTokens = tokens }
        let hiddenFrom = state.hidden.filter { $0.value.contains(hid) }.map(\.key).sorted()
        var summary = AccountSummary(
            homeAccountId: primary.homeAccountId ?? hid,
            username: primary.username ?? "",
            environment: primary.environment ?? "",
            realm: primary.realm ?? "",
            localAccountId: primary.localAccountId,
            name: primary.displayName,
            authorityType: primary.authorityType,
            tenants: entries.map {
                .init(realm: $0.realm ?? "", environment: $0.environment ?? "",
                      localAccountId: $0.localAccountId, username: $0.username)
            },
            apps: apps.keys.sorted().map { key in
                var tokens = apps[key]!
                tokens.accessTokens.sort { ($0.expiresOn ?? 0) > ($1.expiresOn ?? 0) }
                return tokens
            },
            hiddenFrom: hiddenFrom,
            signInRequired: state.signInRequired.contains(hid)
        )
        // accountClaims: the id_token of the primary tenant profile (any client's; they carry the same user). Decoded
        // here, when a summary is built (once per change of the account, `memoizedAccount`), not kept for every id
        // token from the load on; kept as the text an answer writes (a tree is read from it only when asked for).
        if let (_, idToken) = find(.idToken, CacheQuery(homeAccountId: hid, realm: primary.realm ?? "")).first {
            summary.accountClaimsText = idToken.secret.flatMap { try? JWTPayload.canonicalClaims(of: $0) }
        }
        return summary
    }

    /// The last non-empty part of `text` between dots, as `text.split(separator: ".").last` gives it, by bytes.
    package static func lastDotComponent(_ text: String) -> String? {
        var text = text
        // On the contiguous bytes: walking the UTF8View's indexes backwards was a tenth of building a summary.
        return text.withUTF8 { utf8 -> String? in
            let dot = UInt8(ascii: ".")
            var end = utf8.count
            while end > 0, utf8[end - 1] == dot { end -= 1 }
            guard end > 0 else { return nil }
            var start = end
            while start > 0, utf8[start - 1] != dot { start -= 1 }
            return String(decoding: UnsafeBufferPointer(rebasing: utf8[start..<end]), as: UTF8.self)
        }
    }

    public enum LookupError: Error, Equatable, Sendable {
        case notFound(String)
        case ambiguous(String, matches: [String])
    }

    /// The home account id a selector names. Usernames compare case-insensitively (ADAL stored UPNs as typed).
    public func resolve(_ selector: AccountSelector) throws(LookupError) -> String {
        try resolveAccount(selector).homeAccountId
    }

    /// `resolve`, with the account as resolved for the lookups that follow (`cachedHitTokens(account:…)`).
    public func resolveAccount(_ selector: AccountSelector) throws(LookupError)
        -> (homeAccountId: String, account: CacheAccountRef) {
        func byId(_ id: String) -> (String, CacheAccountRef)? {
            accountRef(id).map { (id.lowercasedIfNeeded, $0) }
        }
        func byUsername(_ name: String) throws(LookupError) -> (String, CacheAccountRef)? {
            let matches = Set(all(.account).compactMap { entry -> String? in
                guard entry.entity.username?.lowercased() == name.lowercased() else { return nil }
                return entry.entity.homeAccountId?.lowercased()
            })
            if matches.count > 1 { throw .ambiguous(name, matches: matches.sorted()) }
            return matches.first.flatMap { hid in accountRef(hid).map { (hid, $0) } }
        }
        switch selector {
        case .homeAccountId(let id):
            if let hid = byId(id) { return hid }
            throw .notFound(selector.description)
        case .username(let name):
            if let hid = try byUsername(name) { return hid }
            throw .notFound(selector.description)
        case .either(let text):
            if let hid = byId(text) { return hid }
            if let hid = try byUsername(text) { return hid }
            throw .notFound(text)
        }
    }

    // MARK: Removal

    /// Per-app removal: this client's access, id and refresh tokens go and the account is hidden from it.
    /// Family refresh tokens stay, because the app's FOCI siblings sign in with them.
    public mutating func removeAccount(_ hid: String, forClient clientId: String) -> RemovalReport {
        var report = RemovalReport(homeAccountId: hid)
        let mine = CacheQuery(homeAccountId: hid, clientId: clientId)
        for (key, _) in find(.accessToken, mine) { remove(.accessToken, key: key); report.accessTokens += 1 }
        for (key, _) in find(.idToken, mine) { remove(.idToken, key: key); report.idTokens += 1 }
        for (key, rt) in find(.refreshToken, mine) {
            if rt.familyId != nil { report.familyRefreshTokensKept += 1; continue }
            remove(.refreshToken, key: key)
            report.refreshTokens += 1
        }
        state.hide(hid, from: clientId)
        return report
    }

    /// Sign-out everywhere: every credential and account entry of the home account, for every client.
    public mutating func signOut(_ hid: String) -> RemovalReport {
        var report = RemovalReport(homeAccountId: hid)
        let everything = CacheQuery(homeAccountId: hid)
        for (key, _) in find(.accessToken, everything) { remove(.accessToken, key: key); report.accessTokens += 1 }
        for (key, _) in find(.refreshToken, everything) { remove(.refreshToken, key: key); report.refreshTokens += 1 }
        for (key, _) in find(.idToken, everything) { remove(.idToken, key: key); report.idTokens += 1 }
        for (key, _) in find(.account, everything) { remove(.account, key: key); report.accounts += 1 }
        state.forget(hid)
        return report
    }

    // MARK: Import and export

    /// Merges another SDK's cache document. An entry that names the same credential as one already held
    /// (same account, alias group, client, realm, scopes — whatever its key) replaces it, unless the held one is
    /// newer. Unknown sections and fields come along verbatim.
    public mutating func merge(_ other: CacheDocument) -> ImportReport {
        var report = ImportReport()
        // A row is marked per entry: room for all of them at once, not a doubling at a time (each rehashing them all).
        changedRows.reserveCapacity(changedRows.count + other.entries.values.reduce(0) { $0 + $1.count })
        for kind in CredentialKind.allCases {
            for (key, incoming) in other.entries[kind] ?? [:] {
                let existing = sameCredential(as: incoming, kind: kind)
                if let held = existing.first?.entity {
                    if isNewer(held, than: incoming, kind: kind) { report.keptNewer += 1; continue }
                    for (staleKey, _) in existing { remove(kind, key: staleKey) }
                    report.replaced += 1
                } else {
                    report.added += 1
                }
                put(kind, key: key, incoming)
                if kind == .account { report.accounts += 1 }
                // An app signing an account in again (here: bringing its tokens) makes it visible to it again.
                if kind == .refreshToken, let hid = incoming.homeAccountId, let client = incoming.clientId {
                    state.hidden[client.lowercased()]?.remove(hid.lowercased())
                }
            }
        }
        mergeOpaque(from: other)
        for (name, json) in other.otherSections where name != BrokerState.sectionName {
            setOtherSection(name, json: json)
        }
        return report
    }

    private func sameCredential(as entity: CacheEntity, kind: CredentialKind) -> [(key: String, entity: CacheEntity)] {
        guard let env = entity.environment else { return [] }
        var query = CacheQuery(homeAccountId: entity.homeAccountId ?? "", environment: env)
        switch kind {
        case .accessToken:
            return accessTokens.sameCredential(as: entity, aliases: aliases).map { ($0.key, $0.entity) }
        case .refreshToken:
            query.clientId = entity.clientId ?? ""
            return find(kind, query).filter { $0.entity.familyId == entity.familyId }
        case .idToken:
            query.clientId = entity.clientId ?? ""
            query.realm = entity.realm ?? ""
        case .account:
            query.realm = entity.realm ?? ""
        case .appMetadata:
            query = CacheQuery(environment: env, clientId: entity.clientId ?? "")
        }
        return find(kind, query)
    }

    private func isNewer(_ held: CacheEntity, than incoming: CacheEntity, kind: CredentialKind) -> Bool {
        switch kind {
        case .accessToken: return (held.cachedAt ?? 0) > (incoming.cachedAt ?? 0)
        case .refreshToken: return (held.lastModificationTime ?? 0) > (incoming.lastModificationTime ?? 0)
        default: return false
        }
    }

    /// The MSAL document other SDKs read (brokerd's own section left out).
    public func exported() -> [UInt8] {
        document.serialized(indent: 4, excludingSections: [BrokerState.sectionName])
    }

    /// What brokerd persists: the MSAL document plus its own section.
    public func persisted() -> [UInt8] {
        var copy = document
        if !state.isEmpty { copy.otherSections.append((BrokerState.sectionName, state.json)) }
        return copy.serialized(indent: nil, settingAside: false)
    }
}
