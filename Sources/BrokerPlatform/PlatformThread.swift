#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Threads of brokerd's own, for work that blocks (a poll loop, a netlink socket): never a task, since the
/// cooperative pool has as many threads as cores and a blocked one is gone for every task.
public enum PlatformThread {
    /// Starts a detached thread running `body`; false if the system has no thread to give.
    public static func detach(stackSize: Int = 512 << 10, _ body: @escaping @Sendable () -> Void) -> Bool {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, stackSize)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let box = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, &attributes, { argument in
            Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, box)
        if started != 0 { Unmanaged<Body>.fromOpaque(box).release() }
        return started == 0
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
