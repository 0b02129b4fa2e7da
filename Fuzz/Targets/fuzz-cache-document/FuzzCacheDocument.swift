import BrokerCache
import BrokerJSON

/// A cache document from another SDK's file or an importCache call: reading any bytes ends in a document or a
/// JSONReadError; what brokerd writes reads back and writes the same bytes (no drift from one save to the next);
/// merging it into a cache and answering lookups with its entries' timestamps, however absurd, does not trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheDocument(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? CacheDocument.entity(from: bytes)
    guard let document = try? CacheDocument.parse(bytes) else { return 0 }
    let written = document.serialized()
    guard let reread = try? CacheDocument.parse(written) else { fatalError("brokerd's own document does not read back") }
    require(reread.serialized() == written, "a document changes from one save to the next")
    require(!hasDuplicateKeys(written), "brokerd's document has a key twice (other SDKs keep only the last)")
    _ = document.serialized(indent: nil)
    _ = document.parts(of: 2)

    var cache = TokenCache()
    _ = cache.merge(document)
    _ = cache.merge(reread)
    for now: Int64 in [0, 1_700_000_000] {
        for summary in cache.accountSummaries(now: now) {
            _ = cache.accountSummary(homeAccountId: summary.homeAccountId, now: now)
        }
        for (_, token) in cache.all(.accessToken) {
            _ = (token.cachedAt, token.expiresOn, token.extendedExpiresOn, token.refreshOn, token.lastModificationTime)
            _ = cache.cachedAccessToken(homeAccountId: token.homeAccountId ?? "", clientId: token.clientId ?? "",
                                        environment: token.environment ?? "", tenant: token.realm ?? "",
                                        scopes: token.target, now: now)
        }
    }
    require(!hasDuplicateKeys(cache.exported()), "an export has a key twice")
    _ = cache.persisted()
    return 0
}

/// Whether the top level or a known section of a document names a key twice (sections brokerd does not know are
/// kept byte for byte, duplicates and all).
private func hasDuplicateKeys(_ document: [UInt8]) -> Bool {
    var reader = JSONReader(document)
    var duplicate = false
    var sections = Set<String>()
    try? reader.readObject { (name, reader) throws(JSONReadError) in
        duplicate = duplicate || !sections.insert(name).inserted
        guard CredentialKind(rawValue: name) != nil, try reader.peekKind() == .object else { _ = try reader.readValue(); return }
        var keys = Set<String>()
        try reader.readObject { (key, reader) throws(JSONReadError) in
            duplicate = duplicate || !keys.insert(key).inserted
            _ = try reader.readValue()
        }
    }
    return duplicate
}

/// A broken invariant, reported with its message (a release build's `precondition` traps without one).
private func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
