import BrokerJSON

/// Entries by kind and lowercased home account id, for `TokenCache.find`: every lookup that matters names an
/// account, an account has tens of entries, and `matches` checks the other fields on those. The entries themselves,
/// not only their keys: finding each key again in the document's section ran SipHash over it, a fifth of an
/// account's first hit (its summary finds the account's tokens). Sets of keys by
/// environment, client, realm and scope were 40 % of loading a 100,000-token cache (sets of nearly every key, grown
/// one insert at a time) and narrowed nothing. The hit path does not come here: `TokenCache.accessTokens` and its
/// id-token index hold those tokens typed, in buckets of one account and one client.
///
/// Built on its own from a document, so that a load can build it on a thread while the cache files its tokens
/// (`TokenCache.init(document:aliases:entryKeys:)`): hashing every key is a fifth of a load's index. Keys are hashed
/// by their `ByteDigest` (SipHash over 150-byte keys was most of building this).
public struct EntryKeys: Sendable {
    private(set) var byAccount: [CredentialKind: [DigestHashed: [DigestHashed: CacheEntity]]] = [:]
    /// The `preferred_username` of each id token's claims by its key (nil for claims without one), when built for a
    /// load (`withUsernames`): the id-token index keeps it, and decoding the claims there was a sixth of the index
    /// the load builds on its first thread. Taken by `TokenCache.init(document:aliases:entryKeys:)`.
    var idTokenUsernames: [DigestHashed: String?] = [:]

    init() {}

    public init(_ document: CacheDocument, withUsernames: Bool = false) {
        let accounts = document.entries[.account]?.count ?? 0
        for (kind, section) in document.entries {
            // About one bucket per account in the index of each kind that names accounts.
            if kind != .appMetadata, !section.isEmpty { byAccount[kind, default: [:]].reserveCapacity(accounts) }
            for (key, entity) in section { insert(kind, key, entity) }
        }
        guard withUsernames, let idTokens = document.entries[.idToken] else { return }
        idTokenUsernames.reserveCapacity(idTokens.count)
        for (key, entity) in idTokens {
            idTokenUsernames[DigestHashed(key)] = .some(TokenCache.preferredUsername(of: entity))
        }
    }

    /// One account's entries of `kind` (`hid` lowercased) by key, as the table holds them (no array of them made).
    func entries(_ kind: CredentialKind, account hid: String) -> [DigestHashed: CacheEntity] {
        byAccount[kind]?[DigestHashed(hid)] ?? [:]
    }

    /// Distinct accounts with an entry of `kind`.
    func accountCount(_ kind: CredentialKind) -> Int { byAccount[kind]?.count ?? 0 }

    mutating func insert(_ kind: CredentialKind, _ key: String, _ entity: CacheEntity) {
        guard let hid = entity.homeAccountId?.lowercasedIfNeeded else { return }
        byAccount[kind, default: [:]][DigestHashed(hid), default: [:]][DigestHashed(key)] = entity
    }

    mutating func remove(_ kind: CredentialKind, _ key: String, _ entity: CacheEntity) {
        guard let hid = entity.homeAccountId?.lowercasedIfNeeded else { return }
        let account = DigestHashed(hid)
        byAccount[kind]?[account]?.removeValue(forKey: DigestHashed(key))
        if byAccount[kind]?[account]?.isEmpty == true { byAccount[kind]?[account] = nil }
    }
}
