import BrokerJSON

/// Which entries a lookup wants. Unset fields match anything; set fields compare case-insensitively
/// (`environment` by alias group), and `scopes` asks for a target that is a superset of them.
public struct CacheQuery: Sendable {
    public var homeAccountId: String?
    public var environment: String?
    public var clientId: String?
    public var familyId: String?
    public var realm: String?
    public var scopes: [String]?

    public init(homeAccountId: String? = nil, environment: String? = nil, clientId: String? = nil,
                familyId: String? = nil, realm: String? = nil, scopes: [String]? = nil) {
        self.homeAccountId = homeAccountId
        self.environment = environment
        self.clientId = clientId
        self.familyId = familyId
        self.realm = realm
        self.scopes = scopes
    }
}

/// The whole unified cache in one place: entries as read (keys opaque), plus an index by home account, so that a
/// lookup for an account touches only that account's entries instead of scanning.
public struct TokenCache: Sendable {
    public private(set) var document = CacheDocument()
    public var aliases: EnvironmentAliases
    /// brokerd's own bookkeeping (accounts hidden from an app, accounts needing sign-in, token uses); persisted
    /// beside the entries, never exported. Token uses change through `noteUse`/`setUse`, which mark their own rows.
    public var state: BrokerState {
        get { storedState }
        set {
            storedState = newValue
            changedRows.insert(.state)
            stateVersion &+= 1
            notedUses.removeAll()
        }
        _modify {
            yield &storedState
            changedRows.insert(.state)
            stateVersion &+= 1
            notedUses.removeAll()
        }
    }
    /// Counts changes made through `state`: an account's memoized text holds while it stays the same.
    private var stateVersion: UInt64 = 0
    /// `state` without marking its row: token uses are rows of their own (`noteUse`, `setUse`). A hit notes a use,
    /// and through `state` every hit marked the state row, which kept the writer writing it while hits came in.
    var storedState = BrokerState()
    /// Discovery documents, alias groups and tenant ids as the network last gave them (NetworkMemory.swift).
    public internal(set) var learned = NetworkMemory()
    /// When `noteUse` last noted each use, by `TokenUse.digest`: what a hit reads to leave its use unnoted
    /// (`isNoted`). Emptied whenever the uses change another way (`setUse`, `state`): a hit then hands its use over
    /// again, which is always right.
    var notedUses: [UInt64: Int64] = [:]
    /// Rows changed since the persistence layer last took them (CacheRows.swift).
    var changedRows: Set<CacheRow> = []

    /// Entry keys by kind and account, for `find` (EntryKeys.swift).
    private var index = EntryKeys()
    /// Access tokens typed and bucketed by account and client: what a silent lookup reads (SilentLookup.swift).
    private(set) var accessTokens = AccessTokenIndex()
    /// Id tokens bucketed the same way: the one a token answer carries (`latestIdToken`).
    private var idTokens = IdTokenIndex()
    /// Account summaries as last built, by the number of the home account id (`accessTokens.strings`); an account's
    /// entry goes when one of its entries changes. A token answer carries its account's summary: built per hit, it was
    /// a sixth of a hit. By number, so that a hit finds it by the account its token lookup already resolved
    /// (`CacheAccountRef`), not by hashing and comparing the id once more.
    private var summaries: [UInt32: MemoizedAccount] = [:]
    /// Memoized accounts a change has made stale, with the text encoder their text was made with: made again when
    /// the change is done (`remakeStaleSummaries`), so that an account's next hit after a refresh of its tokens
    /// finds its summary made, as its hits before did.
    private var staleSummaries: [UInt32: AccountTextEncoder] = [:]
    /// Past this many accounts changed at once (an import, a sign-out of many), the accounts' next hits make them.
    public static let staleSummariesRemade = 32
    /// How many Account entries each home account has, by the number of its id (none: absent). What `accountRef`
    /// reads: by number, so that the number found serves the lookups after it.
    private var accountEntries: [UInt32: Int] = [:]

    private struct MemoizedAccount {
        /// Boxed, and never changed once built: reading a memo out of the dictionary copies three references, not
        /// the summary's dozen (a hit reads its account's memo).
        final class Box: Sendable {
            let summary: AccountSummary
            init(_ summary: AccountSummary) { self.summary = summary }
        }
        let box: Box
        var summary: AccountSummary { box.summary }
        init(summary: AccountSummary) { box = Box(summary) }
        /// The summary as a front end writes it (`memoizedAccount(homeAccountId:text:)`), while `stateVersion`
        /// is `textStateVersion`: who it is hidden from and whether it needs a sign-in come from the state.
        var text: [UInt8]?
        var textStateVersion: UInt64 = 0
        /// What wrote `text`: what writes it again when the account changes.
        var encode: AccountTextEncoder?
    }

    /// How a front end writes an account's summary (the socket's `SocketWire.accountText`); the cache keeps the text
    /// without reading it.
    public typealias AccountTextEncoder = @Sendable (AccountSummary) -> [UInt8]?

    public init(aliases: EnvironmentAliases = EnvironmentAliases()) {
        self.aliases = aliases
    }

    /// `entryKeys`: the document's `EntryKeys` when something else builds them meanwhile (a load does, on a thread
    /// of its own); built here when nil.
    public init(document: CacheDocument, aliases: EnvironmentAliases = EnvironmentAliases(),
                entryKeys: (() -> EntryKeys)? = nil) {
        self.aliases = aliases
        self.document = document
        if let json = document.otherSections.first(where: { $0.name == BrokerState.sectionName })?.json {
            state = BrokerState(json: json)
            self.document.otherSections.removeAll { $0.name == BrokerState.sectionName }
        }
        for (kind, section) in document.entries where kind != .idToken {
            if kind == .accessToken { accessTokens.insertAll(section) }
            for (key, entity) in section { addToIndex(kind, key, entity, loading: true) }
        }
        // Id tokens last: a load decodes their claims while the access tokens are filed (`EntryKeys.idTokenUsernames`).
        index = entryKeys?() ?? EntryKeys(document)
        let usernames = index.idTokenUsernames
        index.idTokenUsernames = [:]
        for (key, entity) in document.entries[.idToken] ?? [:] {
            addToIndex(.idToken, key, entity, loading: true, username: usernames[DigestHashed(key)])
        }
    }

    /// What the id-token index keeps of an id token's claims.
    static func preferredUsername(of entity: CacheEntity) -> String? {
        entity.secret.flatMap { JWTPayload.stringClaim("preferred_username", of: $0) }
    }

    // MARK: Reading

    public func entity(_ kind: CredentialKind, key: String) -> CacheEntity? {
        document.entries[kind]?[key]
    }

    public func count(_ kind: CredentialKind) -> Int { document.entries[kind]?.count ?? 0 }

    /// Distinct home accounts with an Account entry (the index's bucket count: no scan).
    public var homeAccountCount: Int { index.accountCount(.account) }

    public func all(_ kind: CredentialKind) -> [(key: String, entity: CacheEntity)] {
        (document.entries[kind] ?? [:]).map { ($0.key, $0.value) }
    }

    /// An id token of the account for this client in this environment (alias group), from the id-token index.
    func indexedIdToken(homeAccountId: String, clientId: String, environment: String) -> String? {
        indexedIdTokenEntry(homeAccountId: homeAccountId, clientId: clientId, environment: environment)?.secret
    }

    func idTokenAnswer(in bucket: AccessTokenIndex.Bucket, environment: String)
        -> (secret: String, preferredUsername: String?, secretNeedsNoEscape: Bool)? {
        idTokens.idTokenAnswer(in: bucket, environment: environment, strings: accessTokens.strings, aliases: aliases)
    }

    func indexedIdTokenEntry(homeAccountId: String, clientId: String, environment: String) -> IdTokenIndex.Entry? {
        idTokens.idToken(homeAccountId: homeAccountId, clientId: clientId, environment: environment,
                         strings: accessTokens.strings, aliases: aliases)
    }

    /// The account of an Account entry with this home account id (compared ignoring case), from the index alone, for
    /// the lookups that follow (`cachedHitTokens`, `memoizedAccountText`): the id is hashed and compared once for all.
    func accountRef(_ homeAccountId: String) -> CacheAccountRef? {
        guard let number = accessTokens.strings.number(of: homeAccountId), accountEntries[number] != nil else { return nil }
        return CacheAccountRef(number: number)
    }

    /// Entries of `kind` matching `query`: with a home account, only that account's entries are looked at.
    public func find(_ kind: CredentialKind, _ query: CacheQuery) -> [(key: String, entity: CacheEntity)] {
        guard let hid = query.homeAccountId else {
            guard let section = document.entries[kind] else { return [] }
            return section.compactMap { matches($0.value, query) ? ($0.key, $0.value) : nil }
        }
        let entries = index.entries(kind, account: hid.lowercasedIfNeeded)
        var found: [(key: String, entity: CacheEntity)] = []
        found.reserveCapacity(entries.count)
        for (key, entity) in entries where matches(entity, query) { found.append((key.text, entity)) }
        return found
    }

    /// Compared as the rest of MSAL compares them: case-insensitively, without making lowercased copies (this runs
    /// for every candidate of every lookup).
    private func matches(_ entity: CacheEntity, _ query: CacheQuery) -> Bool {
        func same(_ a: String?, _ b: String?) -> Bool {
            guard let b else { return true }
            return Self.equalIgnoringCase(a ?? "", b)
        }
        guard same(entity.homeAccountId, query.homeAccountId), same(entity.clientId, query.clientId),
              same(entity.familyId, query.familyId), same(entity.realm, query.realm) else { return false }
        if let environment = query.environment {
            let held = entity.environment ?? ""
            if !Self.equalIgnoringCase(held, environment), aliases.canonical(held) != aliases.canonical(environment) {
                return false
            }
        }
        if let scopes = query.scopes {
            let granted = entity.target
            if !scopes.allSatisfy({ scope in granted.contains { Self.equalIgnoringCase($0, scope) } }) { return false }
        }
        return true
    }

    /// `a.lowercased() == b.lowercased()`, without the copies when both are ASCII.
    package static func equalIgnoringCase(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        var left = a.utf8.makeIterator(), right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return true
            case (let x?, let y?):
                guard x < 0x80, y < 0x80 else { return a.lowercased() == b.lowercased() }
                if x != y, Self.asciiLower(x) != Self.asciiLower(y) { return false }
            default:
                // Different lengths: equal only if lowercasing changes a length, which takes a non-ASCII character.
                return a.utf8.contains { $0 >= 0x80 } || b.utf8.contains { $0 >= 0x80 } ? a.lowercased() == b.lowercased() : false
            }
        }
    }

    static func asciiLower(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }

    /// `accountSummary(homeAccountId:now:)`, built once per change of the account's entries: what a token answer
    /// carries. Who the account is hidden from and whether it needs a sign-in are brokerd's state, read each time.
    public mutating func memoizedAccountSummary(homeAccountId hid: String) -> AccountSummary? {
        memoizedAccount(homeAccountId: hid, text: nil)?.summary
    }

    /// The memoized summary and, when `encode` is given, the summary as `encode` writes it, made once per change of
    /// the account or of brokerd's state (a front end's wire text: the cache keeps it without reading it).
    public mutating func memoizedAccount(homeAccountId hid: String, text encode: AccountTextEncoder?)
        -> (summary: AccountSummary, text: [UInt8]?)? {
        let id = hid.lowercasedIfNeeded
        var memo: MemoizedAccount
        let number: UInt32
        if let known = accessTokens.strings.number(of: id), let memoized = summaries[known] {
            memo = memoized
            number = known
        } else {
            guard let built = accountSummary(homeAccountId: id, now: 0) else { return nil }
            memo = MemoizedAccount(summary: built)
            number = accessTokens.strings.intern(id)
        }
        var summary = memo.summary
        summary.signInRequired = state.signInRequired.contains(id)
        if !state.hidden.isEmpty || !summary.hiddenFrom.isEmpty {
            summary.hiddenFrom = state.hidden.filter { $0.value.contains(id) }.map(\.key).sorted()
        }
        guard let encode else {
            if summaries[number] == nil { summaries[number] = memo }
            return (summary, nil)
        }
        if memo.text == nil || memo.textStateVersion != stateVersion {
            memo.text = encode(summary)
            memo.textStateVersion = stateVersion
            memo.encode = encode
            summaries[number] = memo
        } else if summaries[number] == nil {
            summaries[number] = memo
        }
        return (summary, memo.text)
    }

    /// What a cache hit needs of its account: the username and, with `encode`, the account's text as
    /// `memoizedAccount(homeAccountId:text:)` keeps it. Read in place while the memo holds, so that a hit copies no
    /// summary: only two strings leave the cache.
    /// `account`: the account as `resolveAccount` resolved it, which spares looking the id up again.
    public mutating func memoizedAccountText(homeAccountId hid: String, account: CacheAccountRef? = nil,
                                             text encode: AccountTextEncoder?)
        -> (username: String, text: [UInt8]?)? {
        if let number = account?.number ?? accessTokens.strings.number(of: hid),
           let index = summaries.index(forKey: number) {
            if encode == nil { return (summaries.values[index].box.summary.username, nil) }
            if summaries.values[index].textStateVersion == stateVersion, let text = summaries.values[index].text {
                return (summaries.values[index].box.summary.username, text)
            }
        }
        return memoizedAccount(homeAccountId: hid, text: encode).map { ($0.summary.username, $0.text) }
    }

    /// `memoizedAccountText` for a reader that may not write: the username and text as kept, or nil when the memo
    /// is not made yet (or not for the current state), which only the writer's `memoizedAccountText` makes.
    public func keptAccountText(homeAccountId hid: String, account: CacheAccountRef? = nil, withText: Bool)
        -> (username: String, text: [UInt8]?)? {
        guard let number = account?.number ?? accessTokens.strings.number(of: hid), let memo = summaries[number] else {
            return nil
        }
        // Copied out once: each read through the table copied the memo again.
        if !withText { return (memo.summary.username, nil) }
        guard memo.textStateVersion == stateVersion, let text = memo.text else { return nil }
        return (memo.summary.username, text)
    }

    // MARK: Writing

    /// Adds or replaces the entry under `key`.
    public mutating func put(_ kind: CredentialKind, key: String, _ entity: CacheEntity) {
        if let old = document.entries[kind]?[key] { removeFromIndex(kind, key, old) }
        document.entries[kind, default: [:]][key] = entity
        addToIndex(kind, key, entity)
        changedRows.insert(.entry(kind, key: key))
    }

    /// Room in each section for the entries of `incoming`, made once before an import merges it part by part: a
    /// section grown an entry at a time doubled a dozen times on the way to 100,000 tokens, hashing every key it
    /// held again at each.
    public mutating func reserveCapacity(forMerging incoming: CacheDocument) {
        for (kind, section) in incoming.entries where !section.isEmpty {
            document.entries[kind, default: [:]].reserveCapacity((document.entries[kind]?.count ?? 0) + section.count)
        }
    }

    /// Adds an entry under the key msal-python would use, replacing what is there.
    @discardableResult
    public mutating func add(_ kind: CredentialKind, _ entity: CacheEntity) -> String {
        let key = entity.canonicalKey(as: kind)
        put(kind, key: key, entity)
        return key
    }

    @discardableResult
    public mutating func remove(_ kind: CredentialKind, key: String) -> CacheEntity? {
        guard let old = document.entries[kind]?.removeValue(forKey: key) else { return nil }
        removeFromIndex(kind, key, old)
        changedRows.insert(.entry(kind, key: key))
        return old
    }

    public mutating func setOtherSection(_ name: String, json: String?) {
        document.otherSections.removeAll { $0.name == name }
        if let json { document.otherSections.append((name, json)) }
        changedRows.insert(.section(name))
    }

    public func otherSection(_ name: String) -> String? {
        document.otherSections.first { $0.name == name }?.json
    }

    /// Keeps the verbatim entries of an imported document (non-object entries of known sections).
    package mutating func mergeOpaque(from other: CacheDocument) {
        for (kind, entries) in other.opaqueEntries {
            for (key, json) in entries {
                document.opaqueEntries[kind, default: [:]][key] = json
                changedRows.insert(.opaque(kind, key: key))
            }
        }
    }

    /// Adds alias groups learned by instance discovery. Returns whether a group changed which hosts count as one
    /// environment (lookups compare environments through the groups, so nothing else has to change).
    @discardableResult
    public mutating func learnAliases(_ groups: [[String]]) -> Bool {
        var changed = false
        for group in groups where !group.isEmpty {
            // Hosts not yet counted as one environment (known groups come back unchanged and cost nothing).
            if Set(group.map { aliases.canonical($0) }).count > 1 {
                aliases.add(group)
                changed = true
            }
        }
        return changed  // the index is by home account only: new aliases leave it as it is
    }

    // MARK: Index maintenance

    /// `loading`: from `init`, which files the access tokens and the entry keys of a whole section at once.
    /// `username`: the id token's `preferred_username`, when a load decoded it already.
    private mutating func addToIndex(_ kind: CredentialKind, _ key: String, _ entity: CacheEntity, loading: Bool = false,
                                     username: String?? = nil) {
        if kind == .idToken {
            // Only `preferred_username` is kept of the claims (a summary decodes them when it is built).
            idTokens.insert(key, entity, preferredUsername: username ?? Self.preferredUsername(of: entity),
                            strings: &accessTokens.strings)
        }
        if kind == .accessToken, !loading { accessTokens.insert(key, entity) }
        guard let hid = entity.homeAccountId?.lowercasedIfNeeded else { return }
        forgetSummary(of: hid)
        if kind == .account { accountEntries[accessTokens.strings.intern(hid), default: 0] += 1 }
        if !loading { index.insert(kind, key, entity) }
    }

    private mutating func removeFromIndex(_ kind: CredentialKind, _ key: String, _ entity: CacheEntity) {
        if kind == .accessToken { accessTokens.remove(key, entity) }
        if kind == .idToken { idTokens.remove(key, entity, strings: accessTokens.strings) }
        guard let hid = entity.homeAccountId?.lowercasedIfNeeded else { return }
        forgetSummary(of: hid)
        if kind == .account, let number = accessTokens.strings.number(of: hid), let count = accountEntries[number] {
            accountEntries[number] = count > 1 ? count - 1 : nil
        }
        index.remove(kind, key, entity)
    }

    private mutating func forgetSummary(of hid: String) {
        guard !summaries.isEmpty, let number = accessTokens.strings.number(of: hid),
              let memo = summaries.removeValue(forKey: number) else { return }
        if memo.text != nil, let encode = memo.encode { staleSummaries[number] = encode }
    }

    /// Makes again the memoized accounts that changes since the last call made stale (summary and text), when they
    /// are at most `staleSummariesRemade`; more are left to their next hits. Called when a change is done
    /// (`CacheCell`), not per entry: a refresh changes two or three entries of one account.
    public mutating func remakeStaleSummaries() {
        guard !staleSummaries.isEmpty else { return }
        let stale = staleSummaries
        staleSummaries = [:]
        guard stale.count <= Self.staleSummariesRemade else { return }
        for (number, encode) in stale {
            // An account signed out has no summary to make: nothing is kept for it.
            _ = memoizedAccount(homeAccountId: accessTokens.strings[number], text: encode)
        }
    }
}

/// An account as a lookup resolved it, for a second lookup of the same account (`TokenCache.memoizedAccountText`).
/// Opaque: it names the account within this cache only.
public struct CacheAccountRef: Sendable, Equatable {
    let number: UInt32
}
