#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Threads of brokerd's own, for work that blocks (a poll loop, a bus connection, a netlink socket, a socket
/// connection's reads, one half of the cache load): never a task, since the cooperative pool has as many threads as
/// cores and a blocked one is gone for every task. The one place brokerd starts a thread.
public enum PlatformThread {
    /// Starts a detached thread running `body`; false if the system has no thread to give.
    public static func detach(stackSize: Int = 512 << 10, _ body: @escaping @Sendable () -> Void) -> Bool {
        start(stackSize: stackSize, detached: true, body) != nil
    }

    /// Runs blocking `work` (a D-Bus call with a timeout of seconds) on a thread of its own and waits for its result
    /// without holding a task's thread; on the caller's thread when the system has no thread to give.
    public static func run<Result: Sendable>(_ work: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { continuation in
            let resume = Resume(continuation)
            if !detach({ resume.once(work()) }) { resume.once(work()) }
        }
    }

    /// pthread_create for a closure; the thread, or nil when the system has none to give.
    static func start(stackSize: Int? = nil, detached: Bool, _ body: @escaping @Sendable () -> Void) -> pthread_t? {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
        if detached { pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED)) }
        let box = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, &attributes, { argument in
            Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, box)
        guard started == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            return nil
        }
        return thread
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// A continuation resumed by whichever of the thread and the fallback gets there (only one ever runs).
    private final class Resume<Result: Sendable>: @unchecked Sendable {
        private let continuation: CheckedContinuation<Result, Never>
        init(_ continuation: CheckedContinuation<Result, Never>) { self.continuation = continuation }
        func once(_ result: Result) { continuation.resume(returning: result) }
    }
}

/// A thread joined for its result: one half of the cache load beside the caller's, or a bus connection's loop
/// joined at shutdown.
public final class JoinableThread<Result: Sendable>: @unchecked Sendable {
    // Written by the thread before it ends, read by the joiner after pthread_join: the join orders the two.
    private var result: Result?
    private var thread: pthread_t

    private init(thread: pthread_t) {
        self.thread = thread
    }

    /// Starts `body` on a new thread; nil when the system has no thread to give (the caller then does the work).
    public static func start(_ body: @escaping @Sendable () -> Result) -> JoinableThread? {
        let joinable = JoinableThread(thread: pthread_t())
        // The C callback lives in the non-generic PlatformThread: the compiler's sendability analysis of Swift 6.3.1
        // crashes on a C callback inside a generic type.
        guard let started = PlatformThread.start(detached: false, { joinable.result = body() }) else { return nil }
        joinable.thread = started
        return joinable
    }

    /// Waits for the thread to end and returns what it returned. Call once.
    @discardableResult
    public func join() -> Result {
        pthread_join(thread, nil)
        return result!
    }
}
