import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A connection to brokerd made of plain blocking system calls on the calling thread: one request per line out,
/// answer lines in. It starts no SwiftNIO thread, so a short-lived tool that makes a call or two and exits
/// (`brokerctl token`) does not pay for an event loop it would use once. It blocks the calling thread for each
/// round trip, which is why apps get SwiftNIO (`BrokerConnection` without `blockingCalls`).
final class BlockingLine {
    private let fd: Int32
    private var received: [UInt8] = []
    /// Where the search for the next newline starts in `received`.
    private var scanned = 0
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    init(socketPath: String) throws(BrokerClientError) {
        fd = try UnixSocket.connect(to: socketPath)
    }

    deinit { close(fd) }

    /// Writes `line` and its newline. A broken connection means the request never reached brokerd whole.
    func write(_ line: [UInt8]) throws(WireFailure) {
        let line = line + [UInt8(ascii: "\n")]
        var sent = 0
        while sent < line.count {
            // MSG_NOSIGNAL: a closed connection is an error here, not a SIGPIPE that ends the process.
            let n = line.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .notSent("cannot write to brokerd: \(String(cString: strerror(errno)))")
            }
            sent += n
        }
    }

    /// The next line brokerd sends, without its newline. Throws when brokerd closes the connection first, or
    /// (`BrokerClientError.connection`) when nothing completes a line within `timeoutSeconds` (0: only what has
    /// already arrived).
    func readLine(timeoutSeconds: Int) throws -> [UInt8] {
        let deadline = Self.now() + Int64(timeoutSeconds) * 1_000
        while true {
            if let newline = received[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(received[..<newline])
                received.removeSubrange(...newline)
                scanned = 0
                return line
            }
            scanned = received.count
            guard received.count <= LineDecoder.maximumLine else {
                throw BrokerClientError.connection("brokerd sent a line over 64 MiB")
            }
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, Int32(clamping: max(0, deadline - Self.now())))
            if polled < 0 {
                if errno == EINTR { continue }
                throw BrokerClientError.connection("cannot wait for brokerd: \(String(cString: strerror(errno)))")
            }
            guard polled > 0 else { throw BrokerClientError.connection("no answer from brokerd within \(timeoutSeconds) s") }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 {
                received += chunk[..<n]
            } else if n == 0 {
                throw WireFailure.lostAfterSending("brokerd closed the connection")
            } else if errno != EINTR && errno != EAGAIN {
                throw WireFailure.lostAfterSending("cannot read from brokerd: \(String(cString: strerror(errno)))")
            }
        }
    }

    private static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000 + Int64(time.tv_nsec) / 1_000_000
    }
}
