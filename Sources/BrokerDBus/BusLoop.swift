import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// The loop of a thread that owns an sd-bus connection (sd-bus objects are not thread-safe): process what came,
/// do the work other threads posted, wait for the bus or an eventfd they write to. The D-Bus front end and the consent
/// notifications each run one.
enum BusLoop {
    /// Runs until `stopping` says so or the connection fails (then the sd-bus error is returned). `work` runs after
    /// each round of processing, on this thread; `timeout` says when it has work due (milliseconds; nil: none).
    static func run(_ bus: OpaquePointer, wake: Int32, stopping: () -> Bool, timeout: () -> Int32? = { nil },
                    work: () -> Void) -> Int32? {
        while !stopping() {
            while true {
                let r = sd_bus_process(bus, nil)
                if r < 0 { return r }
                if r == 0 { break }
            }
            work()
            wait(bus, wake: wake, workDue: timeout())
        }
        return nil
    }

    /// Waits for the bus (at most until its next timeout, or the work due, a minute at most) or the wake descriptor,
    /// then drains the descriptor if it woke the thread. A D-Bus cache hit is a round of this loop: its two
    /// descriptors are on the stack, and the descriptor is read only when written (a read that found nothing was a
    /// system call of every hit).
    private static func wait(_ bus: OpaquePointer, wake: Int32, workDue: Int32?) {
        var until: UInt64 = 0
        var timeout: Int32 = 60_000
        if sd_bus_get_timeout(bus, &until) > 0, until != UInt64.max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nowMicros = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
            timeout = until <= nowMicros ? 0 : Int32(min((until - nowMicros + 999) / 1_000, 60_000))
        }
        if let workDue { timeout = min(timeout, workDue) }
        var fds = (pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0),
                   pollfd(fd: wake, events: Int16(POLLIN), revents: 0))
        let woken = withUnsafeMutableBytes(of: &fds) { raw -> Bool in
            let pair = raw.bindMemory(to: pollfd.self)
            return poll(pair.baseAddress, 2, timeout) > 0 && pair[1].revents & Int16(POLLIN) != 0
        }
        if woken {
            var counter: UInt64 = 0
            _ = read(wake, &counter, 8)
        }
    }

    /// Wakes the thread waiting in `run`.
    static func signal(_ wake: Int32) {
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }
}
