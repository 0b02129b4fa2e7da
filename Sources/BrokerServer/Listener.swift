import CBrokerPlatform
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The listening socket and the thread that accepts on it: each connection is handed, with its peer's
/// credentials, to `accepted` (which starts its thread) until `stop`.
final class Listener: Sendable {
    private let fd: Int32
    private let wakeup: Wakeup
    private let closed = Atomic<Bool>(false)

    /// Takes over a listening socket: one systemd passed (socket activation) or one `bind` made.
    init(listening fd: Int32) throws {
        guard let wakeup = Wakeup() else { throw BrokerServer.StartError.setup("cannot make an eventfd: errno \(errno)") }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        self.fd = fd
        self.wakeup = wakeup
    }

    /// A new socket bound to `path` (which must be free) and listening; mode 0600 from the moment it exists.
    static func bind(_ path: String, backlog: Int32) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BrokerServer.StartError.setup("cannot create a socket: errno \(errno)") }
        var socketAddress = address(path)
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let error = errno
        umask(previous)
        guard bound == 0, listen(fd, backlog) == 0 else {
            close(fd)
            throw BrokerServer.StartError.setup("cannot listen on \(path): \(String(cString: strerror(bound == 0 ? errno : error)))")
        }
        chmod(path, 0o600)
        return fd
    }

    /// The AF_UNIX address of `path` (which `prepareSocketPath` has checked fits).
    static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8).prefix(raw.count - 1))
        }
        return address
    }

    /// Accepts until `stop`, on a thread of its own; false if no thread could be started.
    func start(logger: Logger, accepted: @escaping @Sendable (Int32, AcceptedPeer?) -> Void) -> Bool {
        Threads.start { [self] in
            acceptLoop(logger: logger, accepted: accepted)
            close(fd)
            closed.store(true, ordering: .releasing)
        }
    }

    private func acceptLoop(logger: Logger, accepted: @Sendable (Int32, AcceptedPeer?) -> Void) {
        while true {
            let stopping = withUnsafeTemporaryAllocation(of: pollfd.self, capacity: 2) { fds -> Bool in
                fds[0] = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                fds[1] = pollfd(fd: wakeup.readEnd, events: Int16(POLLIN), revents: 0)
                _ = poll(fds.baseAddress, 2, -1)
                return fds[1].revents != 0
            }
            if stopping { return }
            let client = brokerd_accept_cloexec(fd)
            guard client >= 0 else {
                let error = errno
                if error == EAGAIN || error == EINTR || error == ECONNABORTED { continue }
                // Out of descriptors (or memory): the pending connection stays queued and poll would report it again
                // at once; wait a little for connections to close rather than spin.
                logger.warning("cannot accept a connection", metadata: ["error": "\(String(cString: strerror(error)))"])
                usleep(50_000)
                continue
            }
            accepted(client, PeerCredentials.read(from: client))
        }
    }

    /// Stops accepting and closes the socket; returns once it is closed.
    func stop() async {
        wakeup.signal()
        while !closed.load(ordering: .acquiring) { try? await Task.sleep(for: .milliseconds(1)) }
    }
}
