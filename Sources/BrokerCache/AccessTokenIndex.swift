import BrokerJSON

/// Strings the cache holds many times over (home account ids, client ids, realms, environments, scopes), each held
/// once, lowercased, and named by a number. Never shrinks: it holds what the cache has held, which is bounded by the
/// distinct values (a few per account), not by the tokens.
struct StringTable: Sendable {
    /// By the lowercase form, and by each other form seen (an alias of the same number): a form met before is found
    /// with one lookup, without lowering it again (a scope such as `User.Read` is interned for every token holding it).
    private var numbers: [Key: UInt32] = [:]
    private var strings: [String] = []

    /// A string with its `ByteDigest`, worked out once per lookup and kept with the key (a table that grows hashes
    /// its keys again): every hit looks up its account, client, environment, realm and scopes here, and `String`'s
    /// own hash (SipHash over every byte) was most of each lookup.
    private struct Key: Hashable {
        let text: String
        let digest: UInt64

        init(_ text: String) {
            self.text = text
            digest = ByteDigest.of(text)
        }

        func hash(into hasher: inout Hasher) { hasher.combine(digest) }
        func _rawHashValue(seed: Int) -> Int { ByteDigest.tableHash(digest, seed: seed) }
        static func == (a: Key, b: Key) -> Bool { a.digest == b.digest && a.text == b.text }
    }

    mutating func intern(_ text: String) -> UInt32 {
        let key = Key(text)
        if let number = numbers[key] { return number }
        let lower = text.lowercasedIfNeeded
        let lowerKey = lower == text ? key : Key(lower)
        if let number = numbers[lowerKey] {
            numbers[key] = number
            return number
        }
        let number = UInt32(strings.count)
        strings.append(lower)
        numbers[lowerKey] = number
        if lower != text { numbers[key] = number }
        return number
    }

    /// The number of a string already held (compared ignoring case), without adding it.
    func number(of text: String) -> UInt32? {
        if let number = numbers[Key(text)] { return number }
        let lower = text.lowercasedIfNeeded
        return lower == text ? nil : numbers[Key(lower)]
    }

    subscript(number: UInt32) -> String { strings[Int(number)] }
}

/// An access token of the index, as filed in the document. What a lookup compares and what a token answer carries are
/// kept apart, in its bucket's `candidates` and `answers`.
struct IndexedAccessToken: Sendable {
    var key: String
    var entity: CacheEntity
}

/// What a lookup compares of one access token, parsed and lowercased once when the entry is stored. The candidates of
/// a bucket lie side by side, their scopes in one array of the bucket: a lookup reads two small arrays, and of the
/// tokens only the winner (each token's own scope array was a cold read per candidate).
struct AccessTokenCandidate: Sendable {
    var environment: UInt32
    var realm: UInt32
    /// `Int64.min` for an entry without one: never live.
    var expiresOn: Int64
    /// Where its scopes are in the bucket's `scopeNumbers`: sorted by number, each once.
    var scopesStart: UInt32
    var scopesCount: UInt32

    var scopes: Range<Int> { Int(scopesStart)..<Int(scopesStart + scopesCount) }
}

/// The access tokens of one account and one client: `candidates[i]` and `answers[i]` are those of `tokens[i]`.
struct AccessTokenBucket: Sendable {
    private(set) var candidates: [AccessTokenCandidate] = []
    private(set) var scopeNumbers: [UInt32] = []
    /// What a token answer carries, read from the entry once: a hit reads no JSON field, and copies out only this.
    private(set) var answers: [CachedAccessToken] = []
    private(set) var tokens: [IndexedAccessToken] = []

    var isEmpty: Bool { tokens.isEmpty }

    init() {}

    init(capacity: Int) {
        candidates.reserveCapacity(capacity)
        answers.reserveCapacity(capacity)
        tokens.reserveCapacity(capacity)
    }

    mutating func append(_ token: IndexedAccessToken, answer: CachedAccessToken, environment: UInt32, realm: UInt32,
                         expiresOn: Int64?, scopes: [UInt32]) {
        candidates.append(AccessTokenCandidate(environment: environment, realm: realm, expiresOn: expiresOn ?? .min,
                                               scopesStart: UInt32(scopeNumbers.count), scopesCount: UInt32(scopes.count)))
        scopeNumbers.append(contentsOf: scopes)
        answers.append(answer)
        tokens.append(token)
    }

    /// Removes the tokens under `key`; the scope array is rewritten without theirs (a bucket holds a handful).
    mutating func remove(key: String) {
        guard tokens.contains(where: { $0.key == key }) else { return }
        let old = self
        self = AccessTokenBucket(capacity: old.tokens.count)
        for index in old.tokens.indices where old.tokens[index].key != key {
            var candidate = old.candidates[index]
            candidate.scopesStart = UInt32(scopeNumbers.count)
            scopeNumbers.append(contentsOf: old.scopes(of: index))
            candidates.append(candidate)
            answers.append(old.answers[index])
            tokens.append(old.tokens[index])
        }
    }

    func scopes(of index: Int) -> ArraySlice<UInt32> {
        scopeNumbers[candidates[index].scopes]
    }
}

/// An access token as a cache hit hands it out: the fields of a token answer, parsed when the entry was stored (the
/// strings share the entry's storage).
public struct CachedAccessToken: Sendable {
    public var secret: String
    public var tokenType: String
    public var expiresOn: Int64
    public var extendedExpiresOn: Int64
    public var refreshOn: Int64?
    /// Whether the secret goes into JSON as it lies (no byte of it needs an escape): checked once, here, so that an
    /// answer can send the cache's own string instead of scanning and copying it per hit.
    public var secretNeedsNoEscape: Bool
    /// The scopes, in stored order (`CacheEntity.target`): split once, when the token is indexed, into the one
    /// array every token of the same target text shares (`AccessTokenIndex.targets`). Split per hit, it was a
    /// twentieth of a hit.
    public var target: [String]

    init(_ entity: CacheEntity, target: [String]) {
        secret = entity.secret ?? ""
        tokenType = entity.tokenType
        expiresOn = entity.expiresOn ?? 0
        extendedExpiresOn = entity.extendedExpiresOn ?? entity.expiresOn ?? 0
        refreshOn = entity.refreshOn
        secretNeedsNoEscape = JSONWriter.needsNoEscape(secret)
        self.target = target
    }
}

/// A target text's scopes, split once: as numbers for the lookups (sorted, each once) and as strings for the answers
/// (in stored order).
struct IndexedTarget: Sendable {
    var numbers: [UInt32]
    var scopes: [String]
}

/// Access tokens bucketed by (home account, client): a silent lookup reads only the tokens its app holds for its
/// account, typed (TokenCache.cachedAccessToken). Kept beside the document by `TokenCache.put`/`remove`.
struct AccessTokenIndex: Sendable {
    struct Bucket: Hashable, Sendable {
        var account: UInt32
        var client: UInt32

        /// The two numbers as one word, mixed as a digest is (`ByteDigest.tableHash`), without `Hasher`.
        func _rawHashValue(seed: Int) -> Int {
            ByteDigest.tableHash(UInt64(account) << 32 | UInt64(client), seed: seed)
        }
    }

    /// Shared with the id-token index (`IdTokenIndex`), which names its fields by the same numbers.
    var strings = StringTable()
    private var buckets: [Bucket: AccessTokenBucket] = [:]
    /// Each target text held, split once (a cache's tokens hold a few sets of scopes). Never shrinks, as `strings`.
    private var targets: [String: IndexedTarget] = [:]
    /// The clients each account has a bucket of, by the account's number: an account's summary lists every token of
    /// every client (`forEachToken(ofAccount:)`).
    private var clientsByAccount: [UInt32: [UInt32]] = [:]

    /// Files every access token of a section as a load reads it: each bucket sized for its tokens first (grown one
    /// token at a time, a bucket of 10 tokens had room for 16: 8 MiB of a loaded cache of 100,000 tokens), each
    /// token's account and client interned once.
    mutating func insertAll(_ section: [String: CacheEntity]) {
        var counts: [Bucket: Int] = [:]
        let filing = section.values.map { entity -> Bucket? in
            guard let bucket = bucket(for: entity) else { return nil }
            counts[bucket, default: 0] += 1
            return bucket
        }
        buckets.reserveCapacity(buckets.count + counts.count)
        for (bucket, count) in counts where buckets[bucket] == nil {
            buckets[bucket] = AccessTokenBucket(capacity: count)
            clientsByAccount[bucket.account, default: []].append(bucket.client)
        }
        // A dictionary not changed in between gives its members in the same order.
        for ((key, entity), bucket) in zip(section, filing) {
            guard let bucket else { continue }
            insert(key, entity, into: bucket, target: indexedTarget(entity))
        }
    }

    mutating func insert(_ key: String, _ entity: CacheEntity) {
        if let bucket = bucket(for: entity) { insert(key, entity, into: bucket, target: indexedTarget(entity)) }
    }

    /// The entry's target split and numbered, once per target text (a list, as some SDKs write it, each time).
    private mutating func indexedTarget(_ entity: CacheEntity) -> IndexedTarget {
        guard case .string(let text)? = entity[field: "target"] else { return splitTarget(entity) }
        if let known = targets[text] { return known }
        let target = splitTarget(entity)
        targets[text] = target
        return target
    }

    private mutating func splitTarget(_ entity: CacheEntity) -> IndexedTarget {
        let scopes = entity.target
        return IndexedTarget(numbers: Self.sortedOnce(scopes.map { strings.intern($0) }), scopes: scopes)
    }

    private mutating func bucket(for entity: CacheEntity) -> Bucket? {
        guard let hid = entity.homeAccountId else { return nil }
        return Bucket(account: strings.intern(hid), client: strings.intern(entity.clientId ?? ""))
    }

    private mutating func insert(_ key: String, _ entity: CacheEntity, into bucket: Bucket, target: IndexedTarget) {
        if buckets[bucket] == nil { clientsByAccount[bucket.account, default: []].append(bucket.client) }
        buckets[bucket, default: AccessTokenBucket()].append(
            IndexedAccessToken(key: key, entity: entity), answer: CachedAccessToken(entity, target: target.scopes),
            environment: strings.intern(entity.environment ?? ""), realm: strings.intern(entity.realm ?? ""),
            expiresOn: entity.expiresOn, scopes: target.numbers)
    }

    /// The scopes of a target as numbers, sorted and each once; nil when one is a scope no token of the cache holds.
    private func knownScopeNumbers(_ target: [String]) -> [UInt32]? {
        var numbers: [UInt32] = []
        numbers.reserveCapacity(target.count)
        for scope in target {
            guard let number = strings.number(of: scope) else { return nil }
            numbers.append(number)
        }
        return Self.sortedOnce(numbers)
    }

    private static func sortedOnce(_ numbers: [UInt32]) -> [UInt32] {
        var unique: [UInt32] = []
        unique.reserveCapacity(numbers.count)
        for number in numbers.sorted() where unique.last != number { unique.append(number) }
        return unique
    }

    mutating func remove(_ key: String, _ entity: CacheEntity) {
        guard let hid = entity.homeAccountId, let account = strings.number(of: hid),
              let client = strings.number(of: entity.clientId ?? "") else { return }
        let bucket = Bucket(account: account, client: client)
        buckets[bucket]?.remove(key: key)
        guard buckets[bucket]?.isEmpty == true else { return }
        buckets[bucket] = nil
        clientsByAccount[account]?.removeAll { $0 == client }
        if clientsByAccount[account]?.isEmpty == true { clientsByAccount[account] = nil }
    }

    /// The access tokens of the account numbered `account` (`strings`) as its summary lists them, by the client they
    /// are filed under (lowercased; tokens without a client left out): their scopes as split once, their realm and
    /// expiry as their entries give them. From the buckets: finding each entry in the document again and splitting
    /// its target was a fifth of an account's first hit.
    func summaryTokens(ofAccount account: UInt32) -> [(client: String, tokens: [AccountSummary.AccessTokenInfo])] {
        (clientsByAccount[account] ?? []).compactMap { client in
            guard let slot = buckets.index(forKey: Bucket(account: account, client: client)) else { return nil }
            let bucket = buckets.values[slot], name = strings[client]
            var tokens: [AccountSummary.AccessTokenInfo] = []
            tokens.reserveCapacity(bucket.tokens.count)
            for index in bucket.tokens.indices {
                let entity = bucket.tokens[index].entity
                if name.isEmpty, entity.clientId == nil { continue }  // filed under "", as a client of "" is
                // The two keep a missing expiry apart from any number: `.min` among the candidates, 0 in the answers.
                let answer = bucket.answers[index]
                let missing = bucket.candidates[index].expiresOn == .min && answer.expiresOn == 0
                let expiresOn = missing ? nil : answer.expiresOn
                tokens.append(.init(scopes: answer.target, realm: entity.realm, expiresOn: expiresOn))
            }
            return tokens.isEmpty ? nil : (name, tokens)
        }
    }

    /// MSAL's access-token match (reference §3.2) on typed fields: the longest-lived token of the account and client,
    /// in the environment's alias group, whose scopes cover `scopes`, with more than `expiryBufferSeconds` left at
    /// `now`, in `tenant` (any realm for "" and the tenant aliases).
    func bestToken(homeAccountId: String, clientId: String, environment: String, tenant: String, scopes: [String],
                   now: Int64, aliases: EnvironmentAliases) -> IndexedAccessToken? {
        guard let bucket = bucket(homeAccountId: homeAccountId, clientId: clientId),
              let slot = buckets.index(forKey: bucket) else { return nil }
        let found = buckets.values[slot]
        return best(in: found, environment: environment, tenant: tenant, scopes: scopes, now: now, aliases: aliases)
            .map { found.tokens[$0] }
    }

    /// The bucket of an account and client, by their numbers (nil when the cache never held either).
    func bucket(homeAccountId: String, clientId: String) -> Bucket? {
        strings.number(of: homeAccountId).flatMap { bucket(account: $0, clientId: clientId) }
    }

    /// The bucket of an account already resolved and a client (nil when the cache never held the client).
    func bucket(account: UInt32, clientId: String) -> Bucket? {
        strings.number(of: clientId).map { Bucket(account: account, client: $0) }
    }

    /// Only the winning token's answer fields: the rest of its entry is not copied out (a hit's only use of it).
    func bestAnswer(in bucket: Bucket, environment: String, tenant: String, scopes: [String], now: Int64,
                    aliases: EnvironmentAliases) -> CachedAccessToken? {
        guard let slot = buckets.index(forKey: bucket) else { return nil }
        // Taken out of the table once: each read through `buckets.values` copied the bucket, retaining its arrays.
        let found = buckets.values[slot]
        return best(in: found, environment: environment, tenant: tenant, scopes: scopes, now: now, aliases: aliases)
            .map { found.answers[$0] }
    }

    /// The winner's place in its bucket. Reads the bucket's candidates and scope numbers in place: no token is copied.
    private func best(in bucket: borrowing AccessTokenBucket, environment: String, tenant: String, scopes: [String],
                      now: Int64, aliases: EnvironmentAliases) -> Int? {
        // A scope no token of the cache holds is in no token of this bucket.
        var wanted: [UInt32] = []
        wanted.reserveCapacity(scopes.count)
        for scope in scopes {
            guard let number = strings.number(of: scope) else { return nil }
            wanted.append(number)
        }
        let anyRealm = tenant.isEmpty || TokenCache.isTenantAlias(tenant)
        let realm = anyRealm ? nil : strings.number(of: tenant)
        if !anyRealm && realm == nil { return nil }
        let environmentNumber = strings.number(of: environment)
        var canonicalEnvironment: String?  // computed only when a token's environment differs from the request's
        let live = now + expiryBufferSeconds  // no arithmetic on cached values (an imported cache can hold any number)
        return bucket.candidates.withUnsafeBufferPointer { candidates in
            bucket.scopeNumbers.withUnsafeBufferPointer { scopeNumbers -> Int? in
                var best: Int?, bestExpiresOn = Int64.min
                for index in candidates.indices {
                    let candidate = candidates[index]
                    guard candidate.expiresOn > live, bestExpiresOn < candidate.expiresOn,
                          anyRealm || candidate.realm == realm else { continue }
                    let held = UnsafeBufferPointer(rebasing: scopeNumbers[candidate.scopes])
                    guard wanted.allSatisfy({ held.containsSorted($0) }) else { continue }
                    if candidate.environment != environmentNumber {
                        let canonical = canonicalEnvironment ?? aliases.canonical(environment)
                        canonicalEnvironment = canonical
                        guard aliases.canonical(strings[candidate.environment]) == canonical else { continue }
                    }
                    best = index
                    bestExpiresOn = candidate.expiresOn
                }
                return best
            }
        }
    }
}

extension AccessTokenIndex {
    /// The tokens that name the same credential as `entity` (same account, client, realm and alias group, its key id
    /// and exactly its scopes, case aside): what an import replaces with it. From its bucket: an import of 100,000
    /// tokens looked for each among its account's entries by their JSON fields, a seventh of the import.
    func sameCredential(as entity: CacheEntity, aliases: EnvironmentAliases) -> [IndexedAccessToken] {
        guard let environment = entity.environment, let hid = entity.homeAccountId, let account = strings.number(of: hid),
              let client = strings.number(of: entity.clientId ?? ""), let realm = strings.number(of: entity.realm ?? ""),
              let bucket = buckets[Bucket(account: account, client: client)] else { return [] }
        guard let scopes = knownScopeNumbers(entity.target) else { return [] }  // a scope no token holds
        let environmentNumber = strings.number(of: environment)
        let canonical = aliases.canonical(environment), keyId = entity.keyId
        return bucket.tokens.indices.filter { index in
            let candidate = bucket.candidates[index]
            return candidate.realm == realm && bucket.scopes(of: index).elementsEqual(scopes)
                && (candidate.environment == environmentNumber || aliases.canonical(strings[candidate.environment]) == canonical)
                && bucket.tokens[index].entity.keyId == keyId
        }.map { bucket.tokens[$0] }
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
        /// The `preferred_username` of its claims, decoded when the token is stored: broker1's answer needs it.
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
        guard let entries = buckets[bucket],
              let index = Self.latest(in: entries, environment: environment, strings: strings, aliases: aliases)
        else { return nil }
        return entries[index]
    }

    /// What a token answer takes of `idToken(in:…)`: its fields read in place, where copying the entry out retained
    /// its key too, a string the hit never reads (and, at 10,000 accounts, not in the processor's cache).
    func idTokenAnswer(in bucket: AccessTokenIndex.Bucket, environment: String, strings: StringTable,
                       aliases: EnvironmentAliases) -> (secret: String, preferredUsername: String?, secretNeedsNoEscape: Bool)? {
        guard let entries = buckets[bucket],
              let index = Self.latest(in: entries, environment: environment, strings: strings, aliases: aliases),
              let secret = entries[index].secret else { return nil }
        return (secret, entries[index].preferredUsername, entries[index].secretNeedsNoEscape)
    }

    private static func latest(in entries: [Entry], environment: String, strings: StringTable,
                               aliases: EnvironmentAliases) -> Int? {
        let wanted = strings.number(of: environment)
        if let same = entries.lastIndex(where: { $0.environment == wanted }) { return same }
        let canonical = aliases.canonical(environment)
        return entries.lastIndex { aliases.canonical(strings[$0.environment]) == canonical }
    }
}

extension UnsafeBufferPointer where Element == UInt32 {
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
    /// `lowercased()`, without a copy when there is nothing to lower (ids are usually lowercase already). Every hit
    /// checks its home account id and scopes: they are checked 8 bytes at a time (`ASCIIWord`), byte by byte the
    /// check was half of resolving an account.
    package var lowercasedIfNeeded: String {
        func needsLowering(_ byte: UInt8) -> Bool { byte &- 0x41 < 26 || byte >= 0x80 }
        let needs = utf8.withContiguousStorageIfAvailable { ASCIIWord.needsLowering(UnsafeRawBufferPointer($0)) }
            ?? utf8.contains(where: needsLowering)
        return needs ? lowercased() : self
    }
}

/// Eight bytes of text in a register (little-endian), for checks and changes that are ASCII's alone.
enum ASCIIWord {
    /// The high bit of each byte of `word` that is A–Z.
    static func upperFlags(_ word: UInt64) -> UInt64 {
        let seven = word & 0x7F7F_7F7F_7F7F_7F7F
        let atLeastA = seven &+ 0x3F3F_3F3F_3F3F_3F3F  // high bit: the byte's low seven bits are at least 0x41
        let aboveZ = seven &+ 0x2525_2525_2525_2525  // high bit: above 0x5A
        return atLeastA & ~aboveZ & ~word & 0x8080_8080_8080_8080
    }

    /// The word with each of A–Z made a–z (any byte of 0x80 and up is left as it is).
    static func lowered(_ word: UInt64) -> UInt64 { word | (upperFlags(word) >> 2) }

    /// Whether `lowercased()` would change the text: a byte A–Z, or one of 0x80 and up (left to `lowercased()`).
    static func needsLowering(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i + 8 <= bytes.count {
            let word = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            if word & 0x8080_8080_8080_8080 != 0 || upperFlags(word) != 0 { return true }
            i += 8
        }
        while i < bytes.count {
            if bytes[i] &- 0x41 < 26 || bytes[i] >= 0x80 { return true }
            i += 1
        }
        return false
    }
}
