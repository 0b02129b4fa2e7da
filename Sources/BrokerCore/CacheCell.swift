import BrokerCache
import BrokerJSON
import BrokerPlatform
import Synchronization

/// The cache and the little else a silent cache hit needs, behind one reader-writer lock, so that a hit can be
/// answered on the caller's thread (the socket connection's) without a hop through the broker actor.
///
/// Why a lock and not the actor: a hit is a few microseconds of work; an actor hop and back costs more than that,
/// and queues every reader behind whatever the actor is doing (a refresh, an import). The critical sections are
/// lookups and single-entry updates, never I/O, so the lock is held for microseconds. A hit holds it as a reader
/// (`withReadLock`), so hits never wait for each other, and one preempted inside holds up no other: only what
/// writes (the broker, and an account's first hit, which fills its memos) takes it alone (`withLock`). A hit's use
/// waits for the next writer (`noteUseLater`).
/// Nobody keeps a copy of the cache outside the lock: a copy alive while the broker mutates would make that
/// mutation copy the whole cache.
final class CacheCell: @unchecked Sendable {
    /// Not copyable, so that a hit reads it where it lies: passed to `withReadLock`'s body as a copy, it retained and
    /// released every table the cache holds, on every hit, on the reference counts all cores share.
    struct Contents: ~Copyable {
        var cache: TokenCache
        var identity: IdPClient? {
            didSet {
                authorities = [:]
                generation &+= 1
            }
        }
        /// Counts the changes that can change an answer: every change the broker makes to the cache (through
        /// `CacheCell.cache`) and every new identity setting. A use noted by a hit, or rows marked written, do not
        /// count. An answer remembered at one generation is the answer while the generation stays the same (and
        /// the token's own times allow it).
        private(set) var generation: UInt64 = 0
        /// Authorities as validated by `identity`, by the text a request named: parsing and validating one costs
        /// more than the rest of a hit. Only valid ones are kept, and at most `authorityMemoSize` of them. Hashed by
        /// `ByteDigest`: SipHash over a URL was a twentieth of a hit's lookup.
        private var authorities: [DigestHashed: Authority] = [:]
        private static let authorityMemoSize = 256
        /// Hosts whose alias groups instance discovery was asked for (the slow path starts the lookup; a hit on a
        /// host not yet asked takes the slow path once, so that it does). The value is when a failed lookup may be
        /// asked again, in `elapsed()` seconds. By `ByteDigest`, as `authorities`: every hit on an Entra host reads it.
        var aliasLookups: [DigestHashed: Int64] = [:]
        /// Set while the full cache is loading: `cache` is then this partial cache's, for cache hits only.
        var partial: PartialCache?

        mutating func cacheChanged() { generation &+= 1 }

        init(cache: TokenCache, identity: IdPClient?) {
            self.cache = cache
            self.identity = identity
        }

        /// The authority of a silent request (its own, else the client's or the default), validated; nil when there
        /// is none or it is not valid (the full path reports why).
        mutating func validatedAuthority(_ request: SilentTokenRequest) -> Authority? {
            guard let idp = identity else { return nil }
            guard let text = request.authority else { return try? idp.authority(requested: nil, clientId: request.clientId) }
            if let known = authorities[DigestHashed(text)] { return known }
            guard let authority = try? idp.authority(requested: text, clientId: request.clientId) else { return nil }
            if authorities.count >= Self.authorityMemoSize { authorities = [:] }
            authorities[DigestHashed(text)] = authority
            return authority
        }

        /// `validatedAuthority` for a reader: `.some(nil)` only when there is no identity setting or, for no named
        /// authority, none valid; nil when the named authority is not memoized yet (the writer's call makes it).
        func knownAuthority(_ request: SilentTokenRequest) -> Authority?? {
            guard let idp = identity else { return .some(nil) }
            guard let text = request.authority else { return .some(try? idp.authority(requested: nil, clientId: request.clientId)) }
            return authorities[DigestHashed(text)].map { .some($0) }
        }
    }

    private let lock = PlatformReadWriteLock()
    private var contents: Contents
    /// `contents.generation`, readable without the lock: a remembered answer is checked against it on every repeated
    /// request, from every connection's thread at once, and a lock they all take is one a preempted holder makes
    /// them all wait on. Stored (under the lock) only when it changes.
    private let publishedGeneration = Atomic<UInt64>(0)

    /// Uses noted by hits as readers, for the next writer to file (`noteUseLater`). A writer waits for every reader
    /// inside, a preempted one included, and every hit after it waits for the writer: a hit that took the lock alone
    /// for its use made hits under 64 clients wait three times as long at the median. The count is read without the
    /// list's lock, so that a writer with nothing to file takes no second lock.
    private let pendingUses = Locked<[TokenUse]>([])
    private let pendingUseCount = Atomic<Int>(0)
    /// Past this many, the hit that adds one files them itself: a few kilobytes wait at most.
    private static let pendingUsesLimit = 64

    /// Notes a hit's use at the next writer's turn (`TokenCache.noteUse`).
    func noteUseLater(_ use: TokenUse) {
        let count = pendingUses.withLock { pending in
            pending.append(use)
            pendingUseCount.store(pending.count, ordering: .releasing)
            return pending.count
        }
        if count >= Self.pendingUsesLimit { withLock { _ in } }
    }

    /// Under the writer's lock.
    private func filePendingUses() {
        guard pendingUseCount.load(ordering: .acquiring) > 0 else { return }
        let uses = pendingUses.withLock { pending in
            defer { pending = [] }
            pendingUseCount.store(0, ordering: .releasing)
            return pending
        }
        for use in uses { contents.cache.noteUse(use) }
    }

    /// The generation as of the last change made under the lock.
    var generation: UInt64 { publishedGeneration.load(ordering: .acquiring) }

    init(_ contents: consuming Contents) {
        self.contents = contents
    }

    /// Alone: for whatever changes the contents.
    func withLock<Result>(_ body: (inout Contents) throws -> Result) rethrows -> Result {
        lock.writeLock()
        defer {
            contents.cache.remakeStaleSummaries()
            publishGeneration()
            lock.unlock()
        }
        filePendingUses()
        return try body(&contents)
    }

    /// Beside other readers: for a cache hit's lookups, which change nothing.
    func withReadLock<Result>(_ body: (borrowing Contents) throws -> Result) rethrows -> Result {
        try lock.withReadLock { try body(contents) }
    }

    private func publishGeneration() {
        if publishedGeneration.load(ordering: .relaxed) != contents.generation {
            publishedGeneration.store(contents.generation, ordering: .releasing)
        }
    }

    /// In-place access for the broker's `cache` property (`_modify`): no copy of the cache is made.
    var cache: TokenCache {
        get { withLock { $0.cache } }
        _modify {
            lock.writeLock()
            defer {
                // The accounts the change touched that had their summaries made: made again now, under the same
                // lock (an account's first hit makes them under it too), not by their next hit.
                contents.cache.remakeStaleSummaries()
                publishGeneration()
                lock.unlock()
            }
            filePendingUses()
            contents.cacheChanged()
            yield &contents.cache
        }
    }
}
