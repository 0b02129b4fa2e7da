import BrokerJSON

/// Strings the cache holds many times over (home account ids, client ids, realms, environments, scopes), each held
/// once, lowercased, and named by a number. Never shrinks: it holds what the cache has held, which is bounded by the
/// distinct values (a few per account), not by the tokens.
struct StringTable: Sendable {
    private var numbers: [String: UInt32] = [:]
    private var strings: [String] = []

    mutating func intern(_ text: String) -> UInt32 {
        let lower = text.lowercasedIfNeeded
        if let number = numbers[lower] { return number }
        let number = UInt32(strings.count)
        strings.append(lower)
        numbers[lower] = number
        return number
    }

    /// The number of a string already held (compared ignoring case), without adding it.
    func number(of text: String) -> UInt32? { numbers[text.lowercasedIfNeeded] }

    subscript(number: UInt32) -> String { strings[Int(number)] }
}

/// An access token as the silent lookup reads it: every field it compares, parsed and lowercased once, when the entry
/// is stored, so that a lookup compares numbers instead of reading JSON fields and splitting targets.
struct IndexedAccessToken: Sendable {
    var key: String
    var entity: CacheEntity
    var environment: UInt32
    var realm: UInt32
    /// The target's scopes, lowercased, sorted by number and each once.
    var scopes: [UInt32]
    var expiresOn: Int64?
    /// What a token answer carries, read from the entry once: a hit reads no JSON field.
    var answer: CachedAccessToken
}

/// An access token as a cache hit hands it out: the fields of a token answer, parsed when the entry was stored (the
/// strings share the entry's storage). The target stays text until a hit splits it, outside the cache's lock.
public struct CachedAccessToken: Sendable {
    public var secret: String
    public var tokenType: String
    public var expiresOn: Int64
    public var extendedExpiresOn: Int64
    public var refreshOn: Int64?
    /// Whether the secret goes into JSON as it lies (no byte of it needs an escape): checked once, here, so that an
    /// answer can send the cache's own string instead of scanning and copying it per hit.
    public var secretNeedsNoEscape: Bool
    /// The target as stored: text (the usual form) or, as some SDKs write it, a list.
    private var targetText: String?
    private var targetList: [String]?

    init(_ entity: CacheEntity) {
        secret = entity.secret ?? ""
        tokenType = entity.tokenType
        expiresOn = entity.expiresOn ?? 0
        extendedExpiresOn = entity.extendedExpiresOn ?? entity.expiresOn ?? 0
        refreshOn = entity.refreshOn
        secretNeedsNoEscape = JSONWriter.needsNoEscape(secret)
        targetText = entity.fields["target"]?.stringValue
        if targetText == nil, case .array? = entity.fields["target"] { targetList = entity.target }
    }

    /// The scopes, in stored order (`CacheEntity.target`).
    public var target: [String] {
        guard let targetText else { return targetList ?? [] }
        return targetText.utf8.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 }).compactMap(String.init)
    }
}

/// Access tokens bucketed by (home account, client): a silent lookup reads only the tokens its app holds for its
/// account, typed (TokenCache.cachedAccessToken). Kept beside the document by `TokenCache.put`/`remove`.
struct AccessTokenIndex: Sendable {
    struct Bucket: Hashable, Sendable {
        var account: UInt32
        var client: UInt32
    }

    /// Shared with the id-token index (`IdTokenIndex`), which names its fields by the same numbers.
    var strings = StringTable()
    private var buckets: [Bucket: [IndexedAccessToken]] = [:]

    mutating func reserve(accounts: Int) { buckets.reserveCapacity(accounts) }

    mutating func insert(_ key: String, _ entity: CacheEntity) {
        guard let hid = entity.homeAccountId else { return }
        let bucket = Bucket(account: strings.intern(hid), client: strings.intern(entity.clientId ?? ""))
        var scopes = entity.target.map { strings.intern($0) }
        scopes.sort()
        var unique: [UInt32] = []
        unique.reserveCapacity(scopes.count)
        for scope in scopes where unique.last != scope { unique.append(scope) }
        let token = IndexedAccessToken(key: key, entity: entity, environment: strings.intern(entity.environment ?? ""),
                                       realm: strings.intern(entity.realm ?? ""), scopes: unique,
                                       expiresOn: entity.expiresOn, answer: CachedAccessToken(entity))
        buckets[bucket, default: []].append(token)
    }

    mutating func remove(_ key: String, _ entity: CacheEntity) {
        guard let hid = entity.homeAccountId, let account = strings.number(of: hid),
              let client = strings.number(of: entity.clientId ?? "") else { return }
        let bucket = Bucket(account: account, client: client)
        buckets[bucket]?.removeAll { $0.key == key }
        if buckets[bucket]?.isEmpty == true { buckets[bucket] = nil }
    }

    /// MSAL's access-token match (reference §3.2) on typed fields: the longest-lived token of the account and client,
    /// in the environment's alias group, whose scopes cover `scopes`, with more than `expiryBufferSeconds` left at
    /// `now`, in `tenant` (any realm for "" and the tenant aliases).
    func bestToken(homeAccountId: String, clientId: String, environment: String, tenant: String, scopes: [String],
                   now: Int64, aliases: EnvironmentAliases) -> IndexedAccessToken? {
        guard let bucket = bucket(homeAccountId: homeAccountId, clientId: clientId) else { return nil }
        return bestToken(in: bucket, environment: environment, tenant: tenant, scopes: scopes, now: now, aliases: aliases)
    }

    /// The bucket of an account and client, by their numbers (nil when the cache never held either).
    func bucket(homeAccountId: String, clientId: String) -> Bucket? {
        guard let account = strings.number(of: homeAccountId), let client = strings.number(of: clientId) else { return nil }
        return Bucket(account: account, client: client)
    }

    func bestToken(in bucket: Bucket, environment: String, tenant: String, scopes: [String], now: Int64,
                   aliases: EnvironmentAliases) -> IndexedAccessToken? {
        best(in: bucket, environment: environment, tenant: tenant, scopes: scopes, now: now, aliases: aliases)
            .map { $0.tokens[$0.index] }
    }

    /// Only the winning token's answer fields: the rest of its entry is not copied out (a hit's only use of it).
    func bestAnswer(in bucket: Bucket, environment: String, tenant: String, scopes: [String], now: Int64,
                    aliases: EnvironmentAliases) -> CachedAccessToken? {
        best(in: bucket, environment: environment, tenant: tenant, scopes: scopes, now: now, aliases: aliases)
            .map { $0.tokens[$0.index].answer }
    }

    private func best(in bucket: Bucket, environment: String, tenant: String, scopes: [String], now: Int64,
                      aliases: EnvironmentAliases) -> (tokens: [IndexedAccessToken], index: Int)? {
        guard let tokens = buckets[bucket] else { return nil }
        // A scope no token of the cache holds is in no token of this bucket.
        var wanted: [UInt32] = []
        wanted.reserveCapacity(scopes.count)
        for scope in scopes {
            guard let number = strings.number(of: scope) else { return nil }
            wanted.append(number)
        }
        let anyRealm = tenant.isEmpty || TokenCache.tenantAliases.contains(tenant.lowercasedIfNeeded)
        let realm = anyRealm ? nil : strings.number(of: tenant)
        if !anyRealm && realm == nil { return nil }
        let environmentNumber = strings.number(of: environment)
        var canonicalEnvironment: String?  // computed only when a token's environment differs from the request's
        // By index, not by value: a copy of each candidate would retain and release its strings.
        var best: Int?, bestExpiresOn = Int64.min
        for index in tokens.indices {
            guard let expiresOn = tokens[index].expiresOn, expiresOn > now + expiryBufferSeconds,
                  bestExpiresOn < expiresOn,
                  anyRealm || tokens[index].realm == realm,
                  wanted.allSatisfy({ tokens[index].scopes.containsSorted($0) }) else { continue }
            if tokens[index].environment != environmentNumber {
                let canonical = canonicalEnvironment ?? aliases.canonical(environment)
                canonicalEnvironment = canonical
                guard aliases.canonical(strings[tokens[index].environment]) == canonical else { continue }
            }
            best = index
            bestExpiresOn = expiresOn
        }
        return best.map { (tokens, $0) }
    }
}

extension AccessTokenIndex {
    /// The tokens that name the same credential as `entity` (same account, client, realm and alias group, its key id
    /// and exactly its scopes, case aside): what an import replaces with it. From its bucket: an import of 100,000
    /// tokens looked for each among its account's entries by their JSON fields, a seventh of the import.
    func sameCredential(as entity: CacheEntity, aliases: EnvironmentAliases) -> [IndexedAccessToken] {
        guard let environment = entity.environment, let hid = entity.homeAccountId, let account = strings.number(of: hid),
              let client = strings.number(of: entity.clientId ?? ""), let realm = strings.number(of: entity.realm ?? ""),
              let tokens = buckets[Bucket(account: account, client: client)] else { return [] }
        var scopes: [UInt32] = []
        for scope in entity.target {
            guard let number = strings.number(of: scope) else { return [] }  // a scope no token holds
            scopes.append(number)
        }
        scopes.sort()
        var unique: [UInt32] = []
        for scope in scopes where unique.last != scope { unique.append(scope) }
        let environmentNumber = strings.number(of: environment)
        let canonical = aliases.canonical(environment), keyId = entity.keyId
        return tokens.filter { token in
            token.realm == realm && token.scopes == unique
                && (token.environment == environmentNumber || aliases.canonical(strings[token.environment]) == canonical)
                && token.entity.keyId == keyId
        }
    }
}

/// Id tokens bucketed as access tokens are: every token answer carries the newest id token of its account, client
/// and environment, and finding it among the account's entries was a twentieth of a hit.
struct IdTokenIndex: Sendable {
    struct Entry: Sendable {
        var key: String
        var environment: UInt32
        var secret: String?
        /// As `CachedAccessToken.secretNeedsNoEscape`.
        var secretNeedsNoEscape: Bool
        /// The `preferred_username` of its claims (TokenCache.idTokenClaims), which broker1's answer needs.
        var preferredUsername: String?
    }

    private var buckets: [AccessTokenIndex.Bucket: [Entry]] = [:]

    mutating func insert(_ key: String, _ entity: CacheEntity, preferredUsername: String?, strings: inout StringTable) {
        guard let hid = entity.homeAccountId else { return }
        let bucket = AccessTokenIndex.Bucket(account: strings.intern(hid), client: strings.intern(entity.clientId ?? ""))
        buckets[bucket, default: []].append(Entry(key: key, environment: strings.intern(entity.environment ?? ""),
                                                  secret: entity.secret,
                                                  secretNeedsNoEscape: entity.secret.map(JSONWriter.needsNoEscape) ?? true,
                                                  preferredUsername: preferredUsername))
    }

    mutating func remove(_ key: String, _ entity: CacheEntity, strings: StringTable) {
        guard let hid = entity.homeAccountId, let account = strings.number(of: hid),
              let client = strings.number(of: entity.clientId ?? "") else { return }
        let bucket = AccessTokenIndex.Bucket(account: account, client: client)
        buckets[bucket]?.removeAll { $0.key == key }
        if buckets[bucket]?.isEmpty == true { buckets[bucket] = nil }
    }

    /// The id token of the account for the client in the environment's alias group stored last (an account signed in
    /// to several tenants has one per tenant).
    func idToken(homeAccountId: String, clientId: String, environment: String, strings: StringTable,
                 aliases: EnvironmentAliases) -> Entry? {
        guard let account = strings.number(of: homeAccountId), let client = strings.number(of: clientId) else { return nil }
        return idToken(in: AccessTokenIndex.Bucket(account: account, client: client), environment: environment,
                       strings: strings, aliases: aliases)
    }

    func idToken(in bucket: AccessTokenIndex.Bucket, environment: String, strings: StringTable,
                 aliases: EnvironmentAliases) -> Entry? {
        guard let entries = buckets[bucket] else { return nil }
        let wanted = strings.number(of: environment)
        if let same = entries.last(where: { $0.environment == wanted }) { return same }
        let canonical = aliases.canonical(environment)
        return entries.last { aliases.canonical(strings[$0.environment]) == canonical }
    }
}

extension Array where Element == UInt32 {
    /// Binary search of a sorted array (a target has a handful of scopes; this keeps a long one cheap too).
    func containsSorted(_ value: UInt32) -> Bool {
        var low = 0, high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low] == value
    }
}

extension String {
    /// `lowercased()`, without a copy when there is nothing to lower (ids are usually lowercase already).
    package var lowercasedIfNeeded: String {
        func needsLowering(_ byte: UInt8) -> Bool { byte &- 0x41 < 26 || byte >= 0x80 }
        let needs = utf8.withContiguousStorageIfAvailable { $0.contains(where: needsLowering) }
            ?? utf8.contains(where: needsLowering)
        return needs ? lowercased() : self
    }
}
