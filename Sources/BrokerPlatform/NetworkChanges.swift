import CBrokerPlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Tells when the network may have come back: a link, an address or a route appeared (rtnetlink). A burst of changes
/// (an interface coming up brings several) is reported once, after `settleMilliseconds` without another.
public final class NetworkChanges: Sendable {
    private let socket: Int32
    /// A pipe: `stop` writes to its write end, the thread polls its read end.
    private let stopPipe: (read: Int32, write: Int32)

    /// Starts watching on a thread of its own; nil when netlink is not available (a sandbox without it).
    public static func watch(settleMilliseconds: Int32 = 500, onChange: @escaping @Sendable () -> Void) -> NetworkChanges? {
        let socket = brokerd_route_changes_socket()
        guard socket >= 0 else { return nil }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            close(socket)
            return nil
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let watcher = NetworkChanges(socket: socket, stopPipe: (ends[0], ends[1]))
        guard PlatformThread.detach({ watcher.run(settleMilliseconds: settleMilliseconds, onChange: onChange) }) else {
            for fd in [socket, ends[0], ends[1]] { close(fd) }
            return nil
        }
        return watcher
    }

    private init(socket: Int32, stopPipe: (read: Int32, write: Int32)) {
        self.socket = socket
        self.stopPipe = stopPipe
    }

    /// Ends the thread (it closes the descriptors).
    public func stop() {
        close(stopPipe.write)
    }

    private func run(settleMilliseconds: Int32, onChange: @Sendable () -> Void) {
        defer {
            close(socket)
            close(stopPipe.read)
        }
        var pending = false
        while true {
            var fds = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, pending ? settleMilliseconds : -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { return }
            if ready == 0 {
                pending = false
                onChange()
                continue
            }
            while true {
                let read = brokerd_route_changes_read(socket)
                if read < 0 { break }
                if read == 1 { pending = true }
            }
        }
    }
}
