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
    precondition(reread.serialized() == written, "a document changes from one save to the next")
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
    _ = cache.exported()
    _ = cache.persisted()
    return 0
}
