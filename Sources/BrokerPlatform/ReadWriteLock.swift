import CBrokerPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A lock that many readers hold at once and a writer alone: the cache's, which every cache hit reads and the broker
/// writes. Readers never wait for each other, so a reader preempted while it holds the lock (64 connections on two
/// cores) holds up no other reader; a writer waits for the readers inside, and readers that come after a waiting
/// writer wait for it (writer-preferring: a steady stream of hits does not starve the broker's writes). Not
/// recursive: a thread that holds it must not take it again.
public final class PlatformReadWriteLock: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    public init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        if brokerd_rwlock_init_writer_preferring(lock) != 0 { pthread_rwlock_init(lock, nil) }
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deinitialize(count: 1)
        lock.deallocate()
    }

    public func readLock() { pthread_rwlock_rdlock(lock) }
    /// The writer's side has no `with` form: its caller holds it across a `yield` (an in-place `_modify`) too.
    public func writeLock() { pthread_rwlock_wrlock(lock) }
    public func unlock() { pthread_rwlock_unlock(lock) }

    public func withReadLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
