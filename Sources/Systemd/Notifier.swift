import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// sd_notify(3): readiness, status lines, watchdog pings and stopping. Harmless without `$NOTIFY_SOCKET`.
public enum SystemdNotifier {
    public static var isSupervised: Bool { getenv("NOTIFY_SOCKET") != nil }

    public static func ready(status: String) { send("READY=1\nSTATUS=\(status)") }
    public static func status(_ text: String) { send("STATUS=\(text)") }
    public static func stopping(status: String) { send("STOPPING=1\nSTATUS=\(status)") }
    public static func watchdogPing() { send("WATCHDOG=1") }

    /// `RELOADING=1` with the monotonic timestamp systemd ≥ 253 expects for Type=notify-reload.
    public static func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        send("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }

    public static func send(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// The watchdog interval systemd asked for (WatchdogSec=), if any, in microseconds.
    public static func watchdogInterval() -> UInt64? {
        var usec: UInt64 = 0
        return sd_watchdog_enabled(0, &usec) > 0 && usec > 0 ? usec : nil
    }
}

/// Socket activation (sd_listen_fds(3)).
public enum SocketActivation {
    /// The listening AF_UNIX stream socket systemd passed, if any. Unsets `LISTEN_*` so children do not inherit it.
    public static func listeningUnixSocket() throws -> Int32? {
        let count = sd_listen_fds(1)
        if count < 0 { throw ActivationError(message: "sd_listen_fds failed: \(String(cString: strerror(-count)))") }
        if count == 0 { return nil }
        let first = SD_LISTEN_FDS_START
        for fd in first..<(first + count) {
            if sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 {
                return fd
            }
        }
        throw ActivationError(message: "systemd passed \(count) descriptor(s) but none is a listening AF_UNIX stream socket")
    }

    /// The filesystem path a passed socket is bound to (for status and logs).
    public static func boundPath(of fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        return withUnsafeBytes(of: address.sun_path) { raw in
            let bytes = raw.prefix(while: { $0 != 0 })
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }

    public struct ActivationError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }
}
