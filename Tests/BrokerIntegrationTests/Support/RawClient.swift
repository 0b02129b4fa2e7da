import Foundation

/// A bare AF_UNIX client that writes exactly the bytes a test gives it — including the malformed ones no real
/// client library would send — and reads newline-terminated answers.
final class RawClient: @unchecked Sendable {
    enum Failure: Error { case connect(Int32), closed, timeout, io(Int32) }

    let fd: Int32
    private var buffer: [UInt8] = []

    init(_ path: String, receiveTimeout: TimeInterval = 10) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if result != 0 {
            let code = errno
            close(fd)
            throw Failure.connect(code)
        }
        setTimeout(receiveTimeout)
    }

    deinit { close(fd) }

    func setTimeout(_ seconds: TimeInterval) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure.io(errno)
            }
            sent += n
        }
    }

    /// The next line, or nil once the server has closed the connection.
    func readLine() throws -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN { throw Failure.timeout }
                if errno == ECONNRESET { return nil }
                throw Failure.io(errno)
            }
            if n == 0 { return nil }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// True when the server closed the connection (reads end-of-file) within the receive timeout.
    func isClosedByServer() -> Bool {
        while true {
            do {
                guard try readLine() != nil else { return true }
            } catch {
                return false
            }
        }
    }

    func readJSON() throws -> Any {
        guard let line = try readLine() else { throw Failure.closed }
        return try JSONSerialization.jsonObject(with: Data(line.utf8))
    }

    /// The next message (answer or notification) as an object.
    func readMessage() throws -> [String: Any] {
        guard let object = try readJSON() as? [String: Any] else { throw Failure.closed }
        return object
    }

    /// Sends one line and returns the first answer as an object.
    func call(_ line: String) throws -> [String: Any] {
        do { try send(line + "\n") } catch Failure.io(let code) where code == EPIPE || code == ECONNRESET {
            // brokerd may refuse a connection (and close it) before reading a byte: its answer is already here.
        }
        guard let object = try readJSON() as? [String: Any] else { throw Failure.closed }
        return object
    }

    /// Sends a request built from `method` and `params` and returns its answer.
    func request(_ method: String, _ params: [String: Any] = [:], id: Int = 1) throws -> [String: Any] {
        let body: [String: Any] = ["jsonrpc": "2.0", "id": id, "method": method, "params": params]
        let data = try JSONSerialization.data(withJSONObject: body)
        return try call(String(decoding: data, as: UTF8.self))
    }
}

extension Dictionary where Key == String, Value == Any {
    var errorCode: Int? { (self["error"] as? [String: Any])?["code"] as? Int }
    var errorMessage: String? { (self["error"] as? [String: Any])?["message"] as? String }
    var result: [String: Any]? { self["result"] as? [String: Any] }
}
