import BrokerCache

#if canImport(Glibc)
import Glibc
#endif

/// The cache and the little else a silent cache hit needs, behind one mutex, so that a hit can be answered on the
/// caller's thread (the socket's event loop) without a hop through the broker actor.
///
/// Why a lock and not the actor: a hit is a few microseconds of work; an actor hop and back costs more than that,
/// and queues every reader behind whatever the actor is doing (a refresh, an import). The critical sections are
/// lookups and single-entry updates, never I/O, so the lock is held for microseconds. Nobody keeps a copy of the
/// cache outside the lock: a copy alive while the broker mutates would make that mutation copy the whole cache.
final class CacheCell: @unchecked Sendable {
    struct Contents {
        var cache: TokenCache
        var identity: IdentityProvider?
        /// Hosts whose alias groups instance discovery was asked for (the slow path starts the lookup; a hit on a
        /// host not yet asked takes the slow path once, so that it does).
        var aliasLookups: [String: Int64] = [:]
    }

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var contents: Contents

    init(_ contents: Contents) {
        self.contents = contents
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<Result>(_ body: (inout Contents) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&contents)
    }

    /// In-place access for the broker's `cache` property (`_modify`): no copy of the cache is made.
    var cache: TokenCache {
        get { withLock { $0.cache } }
        _modify {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            yield &contents.cache
        }
    }
}
