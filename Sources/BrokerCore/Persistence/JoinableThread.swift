#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A thread of its own for a long synchronous job beside the caller's (one part of the cache load), joined for its
/// result. Not a task: the cooperative pool has as many threads as cores, and a job that blocks one of them while
/// its caller waits for it could wait forever on a one-core machine.
final class JoinableThread<Result: Sendable>: @unchecked Sendable {
    // Written by the thread before it ends, read by the joiner after pthread_join: the join orders the two.
    private var result: Result?
    private var thread: pthread_t

    private init(thread: pthread_t) {
        self.thread = thread
    }

    /// Starts `body` on a new thread; nil when the system has no thread to give (the caller then does the work).
    static func start(_ body: @escaping @Sendable () -> Result) -> JoinableThread? {
        let joinable = JoinableThread(thread: pthread_t())
        let started = PlainThread.start { joinable.result = body() }
        guard let started else { return nil }
        joinable.thread = started
        return joinable
    }

    /// Waits for the thread to end and returns what it returned. Call once.
    func join() -> Result {
        pthread_join(thread, nil)
        return result!
    }
}

/// pthread_create for a closure (kept apart from the generic class: the compiler's sendability analysis of Swift
/// 6.3.1 crashes on a C callback inside a generic type).
private enum PlainThread {
    final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    static func start(_ run: @escaping @Sendable () -> Void) -> pthread_t? {
        let box = Unmanaged.passRetained(Body(run)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { argument in
            Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, box)
        if started != 0 {
            Unmanaged<Body>.fromOpaque(box).release()
            return nil
        }
        return thread
    }
}
