#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// brokerd's mutex: a plain (non-priority-inheriting) pthread mutex.
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
