import Foundation

/// A host that takes connections and never answers, as an identity provider behind a dead network link looks to
/// brokerd (a request waits for its time limit). It counts the connections it was offered and how many of them the
/// other side closed, so that a test can tell whether brokerd tried the network at all, and when it gave up.
final class DeadHost: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let state = NSLock()
    private var accepted: [Int32] = []
    private var closedCount = 0
    private var acceptedCount = 0
    private var stopped = false

    var url: String { "http://127.0.0.1:\(port)" }

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else { throw NSError(domain: "DeadHost", code: Int(errno)) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread { [self] in run() }
    }

    deinit { stop() }

    /// Connections brokerd opened.
    var connections: Int { state.withLock { acceptedCount } }
    /// Of those, the ones brokerd closed (gave up on).
    var closedByPeer: Int { state.withLock { closedCount } }

    func stop() {
        let fds: [Int32] = state.withLock {
            guard !stopped else { return [] }
            stopped = true
            return accepted + [listener]
        }
        for fd in fds { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
    }

    private func run() {
        while true {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            fds += state.withLock { accepted }.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&fds, nfds_t(fds.count), 100) >= 0, !state.withLock({ stopped }) else { return }
            if fds[0].revents != 0 {
                let client = accept(listener, nil, nil)
                if client >= 0 {
                    state.withLock {
                        accepted.append(client)
                        acceptedCount += 1
                    }
                }
            }
            for entry in fds.dropFirst() where entry.revents != 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                // The request is read and ignored; end of stream means brokerd closed its side.
                if recv(entry.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) == 0 {
                    state.withLock {
                        accepted.removeAll { $0 == entry.fd }
                        closedCount += 1
                    }
                    close(entry.fd)
                }
            }
        }
    }
}
