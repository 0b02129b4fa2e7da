import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Signals on the system bus that say the network may be back: logind's `PrepareForSleep(false)` (the machine woke
/// up) and NetworkManager's `StateChanged` to connected. Watched on a thread and a system bus connection of their own
/// (sd-bus objects belong to one thread). Without a system bus (a container), nothing is watched.
public final class SystemEvents: @unchecked Sendable {
    public enum Event: Sendable, Equatable {
        case resumed
        case networkConnected
    }

    /// NM_STATE_CONNECTED_GLOBAL.
    static let networkManagerConnected: UInt32 = 70

    private let onEvent: @Sendable (Event) -> Void
    private var target = brokerd_system_event_target()
    /// `stop` closes the write end; the thread polls the read end beside the bus.
    private var stopPipe: [Int32] = [-1, -1]

    private init(onEvent: @escaping @Sendable (Event) -> Void) {
        self.onEvent = onEvent
    }

    /// Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS, else the standard socket) and starts watching; nil with
    /// the reason when there is no system bus or no thread.
    public static func watch(_ onEvent: @escaping @Sendable (Event) -> Void,
                             startThread: (@escaping @Sendable () -> Void) -> Bool) -> Result<SystemEvents, SystemBusFailure> {
        var bus: OpaquePointer?
        let opened = sd_bus_open_system(&bus)
        guard opened >= 0, let bus else { return .failure(SystemBusFailure(code: opened, what: "cannot connect to the system bus")) }
        let watcher = SystemEvents(onEvent: onEvent)
        guard pipe(&watcher.stopPipe) == 0 else {
            sd_bus_flush_close_unref(bus)
            return .failure(SystemBusFailure(code: -errno, what: "cannot make a pipe"))
        }
        for end in watcher.stopPipe { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        watcher.target.context = Unmanaged.passUnretained(watcher).toOpaque()
        watcher.target.handler = { event, value, context in
            let watcher = Unmanaged<SystemEvents>.fromOpaque(context!).takeUnretainedValue()
            if event == Int32(BROKERD_RESUMED.rawValue) {
                watcher.onEvent(.resumed)
            } else if value == SystemEvents.networkManagerConnected {
                watcher.onEvent(.networkConnected)
            }
        }
        let watched = withUnsafeMutablePointer(to: &watcher.target) { brokerd_watch_system_events(bus, $0) }
        guard watched >= 0 else {
            sd_bus_flush_close_unref(bus)
            for end in watcher.stopPipe { close(end) }
            return .failure(SystemBusFailure(code: watched, what: "cannot watch the system bus's signals"))
        }
        let busAddress = UInt(bitPattern: bus)
        guard startThread({ watcher.run(OpaquePointer(bitPattern: busAddress)!) }) else {
            sd_bus_flush_close_unref(bus)
            for end in watcher.stopPipe { close(end) }
            return .failure(SystemBusFailure(code: -EAGAIN, what: "cannot start a thread"))
        }
        return .success(watcher)
    }

    /// Ends the thread, which closes the connection.
    public func stop() {
        close(stopPipe[1])
    }

    private func run(_ bus: OpaquePointer) {
        defer {
            sd_bus_flush_close_unref(bus)
            close(stopPipe[0])
        }
        while true {
            while true {
                let r = sd_bus_process(bus, nil)
                if r < 0 { return }
                if r == 0 { break }
            }
            var fds = [pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0),
                       pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, -1) < 0, errno != EINTR { return }
            if fds[1].revents != 0 { return }
        }
    }
}

public struct SystemBusFailure: Error, Sendable, CustomStringConvertible {
    public var code: Int32
    public var what: String
    public var description: String { "\(what): \(String(cString: strerror(-code)))" }
}
