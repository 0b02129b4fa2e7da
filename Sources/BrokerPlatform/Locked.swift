import CBrokerPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// brokerd's lock: a plain (non-priority-inheriting) pthread mutex.
///
/// Why not Swift's `Synchronization.Mutex`: on Linux it is a priority-inheriting futex, whose contended path goes
/// through the kernel's rt_mutex. With 64 connections busy on two cores, a Mutex that every cache hit read (the log
/// level's) took a fifth of brokerd's CPU in its slow path; glibc's plain mutex under the same load did not show in
/// the profile. Critical sections stay short and never do I/O, so priority inheritance buys nothing here.
///
/// A class, so that it has a stable address (a pthread mutex must not move).
public final class PlatformMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// For callers that must hold the lock across a `yield` (an in-place `_modify`); prefer `withLock`.
    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    public func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

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

/// A value behind `PlatformMutex`: every access is a `withLock`.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex = PlatformMutex()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return try body(&value)
    }
}
