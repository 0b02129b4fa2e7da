import BrokerPlatform
import CBrokerPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the socket front end's threads need besides reads and writes: their stack size, waking a thread that waits
/// in poll, and cheap clocks for timeouts (threads themselves are started by BrokerPlatform's PlatformThread).
enum Threads {
    /// Each connection and the acceptor run on a thread of their own, which runs synchronous code only (a cache hit
    /// is answered there; anything else goes to a task). Far less than the 8 MiB default, since there can be hundreds;
    /// JSON nesting is bounded (JSONReader.maximumDepth), so this is ample.
    static let stackSize = 2 << 20

    /// Starts a detached thread (PlatformThread) with the connections' stack size; false if the system has none.
    static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        PlatformThread.detach(stackSize: stackSize, body)
    }

    /// Nanoseconds on the monotonic clock, for timing a cache hit: a plain integer, where ContinuousClock's
    /// Duration arithmetic (128-bit) costs more than the rest of the hit's bookkeeping.
    static func nowNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// Milliseconds on a monotonic clock that costs no system call (CLOCK_MONOTONIC_COARSE, a few ms of
    /// resolution): it marks activity on every read, and timeouts are seconds long.
    static func nowMilliseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }
}

/// An eventfd in a thread's poll set, so that other threads can make its poll return (a finished request's answer
/// to write, an eviction, shutdown). Signals coalesce: one wakes the thread for any number.
final class Wakeup: Sendable {
    let readEnd: Int32

    init?() {
        readEnd = brokerd_eventfd_nonblocking()
        guard readEnd >= 0 else { return nil }
    }

    func signal() {
        var one: UInt64 = 1
        _ = write(readEnd, &one, 8)
    }

    func drain() {
        var count: UInt64 = 0
        _ = read(readEnd, &count, 8)
    }

    deinit { close(readEnd) }
}
