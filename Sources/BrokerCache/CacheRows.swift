import BrokerJSON

/// One unit of the persisted cache. Every change marks the rows it touched, so that persisting a change costs the
/// change, not the cache: a refreshed token is two or three rows, whatever else the cache holds.
public enum CacheRow: Hashable, Sendable {
    /// An entry of a unified-cache section (an object: a credential, account or app metadata).
    case entry(CredentialKind, key: String)
    /// An entry of a known section that is not an object, kept verbatim.
    case opaque(CredentialKind, key: String)
    /// A top-level section brokerd does not know, kept verbatim.
    case section(String)
    /// A token use (`TokenUse.key`): what the background refresh keeps fresh.
    case use(String)
    /// brokerd's own small state: accounts hidden from apps, accounts needing sign-in.
    case state
    /// A fact the network told brokerd (`NetworkMemory.key`): a discovery document, alias groups, a tenant id.
    case learned(String)

    /// A row's text hashed by its `ByteDigest`: an import marks a row per entry, and SipHash over each key of 150
    /// bytes, at each insert and again at each growth of the set, was a twentieth of the import.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .entry(let kind, let key): Self.combine(0, kind, key, into: &hasher)
        case .opaque(let kind, let key): Self.combine(1, kind, key, into: &hasher)
        case .section(let name): Self.combine(2, nil, name, into: &hasher)
        case .use(let key): Self.combine(3, nil, key, into: &hasher)
        case .state: hasher.combine(UInt8(4))
        case .learned(let key): Self.combine(5, nil, key, into: &hasher)
        }
    }

    private static func combine(_ tag: UInt8, _ kind: CredentialKind?, _ text: String, into hasher: inout Hasher) {
        hasher.combine(tag)
        if let kind { hasher.combine(kind) }
        hasher.combine(ByteDigest.of(text))
    }
}

/// A row and its current content (nil when it was removed).
public enum CacheRowValue: Sendable {
    case entry(CredentialKind, key: String, CacheEntity?)
    case opaque(CredentialKind, key: String, String?)
    case section(String, String?)
    case use(key: String, TokenUse?)
    case state(String)
    case learned(key: String, NetworkMemory.Fact?)
}

extension TokenCache {
    /// A cache as persisted: the document, brokerd's state and token uses. Nothing is marked changed.
    public init(document: CacheDocument, state: BrokerState, aliases: EnvironmentAliases = EnvironmentAliases(),
                entryKeys: (() -> EntryKeys)? = nil) {
        self.init(document: document, aliases: aliases, entryKeys: entryKeys)
        self.state = state
        changedRows = []
    }

    /// The rows changed since the last call; they count as unchanged afterwards. A write that fails gives them back
    /// with `markChanged`, so that the next write retries them.
    public mutating func takeChangedRows() -> Set<CacheRow> {
        defer { changedRows = [] }
        return changedRows
    }

    public mutating func markChanged(_ rows: Set<CacheRow>) {
        changedRows.formUnion(rows)
    }

    public var hasChangedRows: Bool { !changedRows.isEmpty }

    /// Every row the cache holds (a first write, a migration).
    public func allRows() -> Set<CacheRow> {
        var rows: Set<CacheRow> = [.state]
        for (kind, section) in document.entries { for key in section.keys { rows.insert(.entry(kind, key: key)) } }
        for (kind, section) in document.opaqueEntries { for key in section.keys { rows.insert(.opaque(kind, key: key)) } }
        for section in document.otherSections { rows.insert(.section(section.name)) }
        for key in state.uses.keys { rows.insert(.use(key)) }
        for key in learned.facts.keys { rows.insert(.learned(key)) }
        return rows
    }

    /// What a row holds now (nil: the row is gone). Cheap (values are shared, not copied), so the persistence layer
    /// takes them under the cache's lock and serializes them outside it.
    public func value(of row: CacheRow) -> CacheRowValue {
        switch row {
        case .entry(let kind, let key): return .entry(kind, key: key, entity(kind, key: key))
        case .opaque(let kind, let key): return .opaque(kind, key: key, document.opaqueEntries[kind]?[key])
        case .section(let name): return .section(name, otherSection(name))
        case .use(let key): return .use(key: key, state.uses[key])
        case .state: return .state(state.smallStateJSON)
        case .learned(let key): return .learned(key: key, learned.facts[key])
        }
    }

    public func opaqueEntry(_ kind: CredentialKind, key: String) -> String? {
        document.opaqueEntries[kind]?[key]
    }

    // MARK: What the network told brokerd

    /// Remembers a fact (NetworkMemory); the row is marked only when it changed. Learned alias groups also join the
    /// cache's environment aliases. Returns whether anything changed.
    @discardableResult
    public mutating func learn(_ kind: NetworkMemory.Kind, _ subject: String, value: String, at now: Int64) -> Bool {
        guard learned.learn(kind, subject, value: value, at: now) else { return false }
        changedRows.insert(.learned(NetworkMemory.key(kind, subject)))
        if kind == .aliases { learnAliases(NetworkMemory.aliasGroups(of: learned.fact(kind, subject)!)) }
        return true
    }

    /// A cache as persisted with what the network had told brokerd (nothing marked changed).
    /// `entryKeys` as for `init(document:aliases:entryKeys:)`.
    public init(document: CacheDocument, state: BrokerState, learned: NetworkMemory, entryKeys: (() -> EntryKeys)? = nil) {
        self.init(document: document, state: state, entryKeys: entryKeys)
        self.learned = learned
        for (key, fact) in learned.facts where NetworkMemory.parse(key: key)?.kind == .aliases {
            learnAliases(NetworkMemory.aliasGroups(of: fact))
        }
    }

    // MARK: Token uses

    /// Remembers that an app asked for this token. Called on every request, so the row is marked only when the
    /// use is new or its time moved by more than `useResolution`: the background refresh needs "used within
    /// hours", not the last second, and a hit must not make a write.
    public mutating func noteUse(_ use: TokenUse) {
        let key = use.key
        // Uses that come and go would grow it for ever: it starts again past the uses it can stand for.
        if notedUses.count > 2 * storedState.uses.count + 1024 { notedUses.removeAll() }
        notedUses[use.digest] = use.lastUsed
        guard let index = storedState.uses.index(forKey: key) else {
            storedState.uses[key] = use
            changedRows.insert(.use(key))
            return
        }
        // A use noted before (the same key: the same use, case and scope order aside) only moves its time, in place:
        // replacing the value retained the new one's strings and released the old one's, on every cache hit.
        let previous = storedState.uses.values[index].lastUsed
        storedState.uses.values[index].lastUsed = use.lastUsed
        if use.lastUsed - previous >= Self.useResolution || use.lastUsed < previous { changedRows.insert(.use(key)) }
    }

    public static let useResolution: Int64 = 600

    /// How stale a cache hit may leave its use's time in memory. Only the background refresh reads it, as "used in
    /// the last hours" (`recentWindowSeconds`), so a minute changes nothing it decides. Coarser than the second, a
    /// hit hands its use to the writer once a minute, not once a second: under varied hits over thousands of
    /// tokens, nearly every hit was the first of its use in its second.
    public static let hitUseResolution: Int64 = 60

    /// Whether a hit may leave `use` unnoted: the same use is noted, at most `hitUseResolution` seconds before it (a
    /// reader's check; `noteUse` is the writer's).
    ///
    /// By the use's digest, not its key: making the key and hashing it cost a hit more than its token lookup. Two
    /// different uses of one digest (a chance of one in 2^64 per pair) would leave the second's time unmoved: the
    /// background refresh could then take it for unused, and the app's next silent request would refresh its token.
    public func isNoted(_ use: TokenUse) -> Bool {
        guard let noted = notedUses[use.digest] else { return false }
        let age = use.lastUsed - noted
        return age >= 0 && age < Self.hitUseResolution
    }

    public mutating func setUse(_ key: String, _ use: TokenUse?) {
        notedUses.removeAll()
        storedState.uses[key] = use
        changedRows.insert(.use(key))
    }

    /// Forgets the uses of an account (for one client, or every client).
    public mutating func forgetUses(of homeAccountId: String, clientId: String?) {
        let hid = homeAccountId.lowercased(), client = clientId?.lowercased()
        for (key, use) in state.uses where use.homeAccountId.lowercased() == hid
            && (client == nil || use.clientId.lowercased() == client) {
            setUse(key, nil)
        }
    }
}
