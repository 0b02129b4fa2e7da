import CSystemd
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the socket front end's threads need from the system besides reads and writes: starting a thread, waking a
/// thread that waits in poll, and a cheap clock for timeouts.
enum Threads {
    /// Each connection and the acceptor run on a thread of their own, which runs synchronous code only (a cache hit
    /// is answered there; anything else goes to a task). Far less than the 8 MiB default, since there can be hundreds;
    /// JSON nesting is bounded (JSONReader.maximumDepth), so this is ample.
    static let stackSize = 2 << 20

    /// Starts a detached thread running `body`; false if the system has no thread to give.
    static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, stackSize)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, &attributes, { argument in
            let body = Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue()
            body.run()
            return nil
        }, box)
        if started != 0 { Unmanaged<ThreadBody>.fromOpaque(box).release() }
        return started == 0
    }

    private final class ThreadBody {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Milliseconds on a monotonic clock that costs no system call (CLOCK_MONOTONIC_COARSE, a few ms of
    /// resolution): it marks activity on every read, and timeouts are seconds long.
    static func nowMilliseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }
}

/// A pipe whose read end sits in a thread's poll set, so that other threads can make its poll return (a finished
/// request's answer to write, an eviction, shutdown). Signals coalesce: one byte wakes the thread for any number.
final class Wakeup: Sendable {
    let readEnd: Int32
    private let writeEnd: Int32

    init?() {
        var ends: [Int32] = [-1, -1]
        guard brokerd_pipe_nonblocking(&ends) == 0 else { return nil }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    func signal() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)  // a full pipe already wakes the reader
    }

    func drain() {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &bytes, { read(readEnd, $0.baseAddress, $0.count) }) == 32 {}
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }
}
