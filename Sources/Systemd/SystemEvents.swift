import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// Bus signals brokerd acts on. On the system bus, those that say the network may be back: logind's
/// `PrepareForSleep(false)` (the machine woke up) and NetworkManager's `StateChanged` to connected. On the session
/// bus, those that say the Secret Service changed (a new owner of its name, a collection unlocked): a cache waiting
/// for its key may open now. Watched on a thread and a bus connection of their own (sd-bus objects belong to one
/// thread). Without the bus (a container), nothing is watched.
public final class SystemEvents: @unchecked Sendable {
    public enum Event: Sendable, Equatable {
        case resumed
        case networkConnected
        case secretServiceChanged
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
        return watch(bus, onEvent, startThread: startThread, what: "the system bus's signals") { brokerd_watch_system_events($0, $1) }
    }

    /// Connects to the session bus and watches the Secret Service (`secretServiceChanged`).
    public static func watchSecretService(_ onEvent: @escaping @Sendable (Event) -> Void,
                                          startThread: (@escaping @Sendable () -> Void) -> Bool) -> Result<SystemEvents, SystemBusFailure> {
        var bus: OpaquePointer?
        let opened = sd_bus_open_user(&bus)
        guard opened >= 0, let bus else { return .failure(SystemBusFailure(code: opened, what: "cannot connect to the session bus")) }
        return watch(bus, onEvent, startThread: startThread, what: "the Secret Service's signals") { brokerd_watch_secret_service($0, $1) }
    }

    private static func watch(_ bus: OpaquePointer, _ onEvent: @escaping @Sendable (Event) -> Void,
                              startThread: (@escaping @Sendable () -> Void) -> Bool, what: String,
                              match: (OpaquePointer, UnsafeMutablePointer<brokerd_system_event_target>) -> Int32)
        -> Result<SystemEvents, SystemBusFailure> {
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
            } else if event == Int32(BROKERD_SECRET_SERVICE_CHANGED) {
                watcher.onEvent(.secretServiceChanged)
            } else if value == SystemEvents.networkManagerConnected {
                watcher.onEvent(.networkConnected)
            }
        }
        let watched = withUnsafeMutablePointer(to: &watcher.target) { match(bus, $0) }
        guard watched >= 0 else {
            sd_bus_flush_close_unref(bus)
            for end in watcher.stopPipe { close(end) }
            return .failure(SystemBusFailure(code: watched, what: "cannot watch \(what)"))
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
