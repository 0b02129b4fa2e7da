import BrokerJSON
import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// glibc's `struct ucred` (not visible from Swift): same layout.
private struct PeerCredentials {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// Why a call to brokerd did not produce a result.
public enum BrokerClientError: Error, Sendable, CustomStringConvertible {
    /// Nothing answers on the socket (no daemon, or it is not socket-activated).
    case brokerNotRunning(socket: String, reason: String)
    /// brokerd answered with a JSON-RPC error.
    case rpc(RPCError)
    /// The connection broke or brokerd sent something that is not a JSON-RPC answer.
    case connection(String)

    public var description: String {
        switch self {
        case .brokerNotRunning(let socket, let reason):
            return "brokerd is not running at \(socket) (\(reason))"
        case .rpc(let error): return error.message
        case .connection(let why): return "connection to brokerd failed: \(why)"
        }
    }
}

/// A connection to brokerd: JSON-RPC 2.0 requests over the Unix socket, one line each.
///
/// Calls are serialized by the actor; the socket is opened on first use and reopened after a failure, so a
/// restarted daemon is picked up by the next call.
public actor BrokerConnection {
    public let socketPath: String
    private let timeoutSeconds: Int
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []
    private var nextId = 1

    /// `socketPath` nil resolves like brokerd does: `$BROKERD_SOCKET`, else `$XDG_RUNTIME_DIR/brokerd/brokerd.sock`.
    public init(socketPath: String? = nil, timeoutSeconds: Int = 120) {
        self.socketPath = SocketLocation.resolve(explicit: socketPath)
        self.timeoutSeconds = timeoutSeconds
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Calls `method` with `params` and decodes the result as `Result`.
    public func call<Params: Encodable, Result: Decodable>(_ method: BrokerMethod, _ params: Params,
                                                           as type: Result.Type) throws -> Result {
        let paramsJSON: [UInt8]
        do { paramsJSON = try ProtocolCoding.encode(params) } catch {
            throw BrokerClientError.connection("cannot encode params: \(error)")
        }
        let resultJSON = try callRaw(method.rawValue, paramsJSON: paramsJSON)
        do { return try ProtocolCoding.decode(type, from: resultJSON) } catch {
            throw BrokerClientError.connection("unexpected \(method.rawValue) result: \(ProtocolCoding.describe(error))")
        }
    }

    public func call<Result: Decodable>(_ method: BrokerMethod, as type: Result.Type) throws -> Result {
        try call(method, NoParams(), as: type)
    }

    /// A notification brokerd sent while a request ran (`browserUrl`, `deviceCode`): method and raw params JSON.
    public typealias NotificationHandler = @Sendable (_ method: String, _ params: [UInt8]) -> Void

    /// Calls `method`, handing notifications that arrive before the answer to `onNotification`. `timeoutSeconds`
    /// bounds the wait for the answer (interactive sign-ins take minutes).
    public func call<Params: Encodable, Result: Decodable>(_ method: BrokerMethod, _ params: Params, as type: Result.Type,
                                                           timeoutSeconds: Int,
                                                           onNotification: @escaping NotificationHandler) throws -> Result {
        let paramsJSON: [UInt8]
        do { paramsJSON = try ProtocolCoding.encode(params) } catch {
            throw BrokerClientError.connection("cannot encode params: \(error)")
        }
        let resultJSON = try callRaw(method.rawValue, paramsJSON: paramsJSON, timeoutSeconds: timeoutSeconds,
                                     onNotification: onNotification)
        do { return try ProtocolCoding.decode(type, from: resultJSON) } catch {
            throw BrokerClientError.connection("unexpected \(method.rawValue) result: \(ProtocolCoding.describe(error))")
        }
    }

    /// Sends one request and returns the raw JSON of its result.
    public func callRaw(_ method: String, paramsJSON: [UInt8], timeoutSeconds: Int? = nil,
                        onNotification: NotificationHandler? = nil) throws -> [UInt8] {
        if fd >= 0, peerHasClosed() { disconnect() }
        if fd < 0 { try connect() }
        let id = nextId
        nextId += 1
        setReceiveTimeout(timeoutSeconds ?? self.timeoutSeconds)
        defer { if fd >= 0, timeoutSeconds != nil { setReceiveTimeout(self.timeoutSeconds) } }
        do {
            try send(RPCEnvelope.request(id: id, method: method, paramsJSON: paramsJSON) + [0x0A])
            while true {
                let line = try readLine(timeoutSeconds: timeoutSeconds ?? self.timeoutSeconds)
                switch try answer(in: line, for: id) {
                case .result(let result): return result
                case .notification(let name, let params): onNotification?(name, params)
                case .other: continue
                }
            }
        } catch let error as BrokerClientError {
            if case .rpc = error {} else { disconnect() }
            throw error
        }
    }

    public func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
        buffer.removeAll()
    }

    // MARK: Wire

    private enum Incoming {
        case result([UInt8])
        case notification(String, [UInt8])
        case other
    }

    /// What `line` is to the caller waiting for request `id`.
    private func answer(in line: [UInt8], for id: Int) throws -> Incoming {
        var reader = JSONReader(line)
        var answerId: JSONValue?, result: [UInt8]?, error: JSONValue?, notification: String?, params: [UInt8] = []
        do {
            try reader.readObject { (key, reader) throws(JSONReadError) in
                switch key {
                case "id": answerId = try reader.readValue()
                case "result": result = Array(line[try reader.readRawRange()])
                case "error": error = try reader.readValue()
                case "method": notification = try reader.readValue().stringValue ?? ""
                case "params": params = Array(line[try reader.readRawRange()])
                default: _ = try reader.readValue()
                }
            }
        } catch {
            throw BrokerClientError.connection("brokerd sent invalid JSON: \(error)")
        }
        if let notification { return .notification(notification, params) }
        if let error, let rpc = RPCError(json: error) {
            // id null: the connection itself was refused (peer check, connection cap, oversized message).
            if answerId == .int(id) || answerId == .null { throw BrokerClientError.rpc(rpc) }
            return .other
        }
        guard answerId == .int(id) else { return .other }
        guard let result else { throw BrokerClientError.connection("answer without result or error") }
        return .result(result)
    }

    private func setReceiveTimeout(_ seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    private func connect() throws {
        let socketFD = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketFD >= 0 else { throw BrokerClientError.connection(String(cString: strerror(errno))) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(socketPath.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(socketFD)
            throw BrokerClientError.brokerNotRunning(socket: socketPath, reason: "socket path too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let reason = String(cString: strerror(errno))
            close(socketFD)
            throw BrokerClientError.brokerNotRunning(socket: socketPath, reason: reason)
        }
        // Talk only to a brokerd of this user (or root's system service): whoever else listens there could hand
        // out forged tokens or collect imported caches.
        var credentials = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(socketFD, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            close(socketFD)
            throw BrokerClientError.connection("cannot read the peer credentials of \(socketPath)")
        }
        guard credentials.uid == getuid() || credentials.uid == 0 || getuid() == 0 else {
            close(socketFD)
            throw BrokerClientError.connection("\(socketPath) is served by uid \(credentials.uid), not by this user; refusing to use it")
        }
        fd = socketFD
    }

    /// Whether brokerd closed the open connection since the last call (it restarted, or closed an idle
    /// connection): such a connection is replaced before a request is sent on it, never after.
    private func peerHasClosed() -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN) | 0x2000 /* POLLRDHUP */, revents: 0)
        guard poll(&entry, 1, 0) > 0 else { return false }
        if entry.revents & (Int16(POLLHUP) | Int16(POLLERR) | 0x2000) != 0 { return true }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) == 0
    }

    private func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw BrokerClientError.connection("send: \(String(cString: strerror(errno)))")
            }
            sent += n
        }
    }

    private func readLine(timeoutSeconds: Int) throws -> [UInt8] {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw BrokerClientError.connection("no answer within \(timeoutSeconds) s")
                }
                throw BrokerClientError.connection("receive: \(String(cString: strerror(errno)))")
            }
            if n == 0 { throw BrokerClientError.connection("brokerd closed the connection") }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }
}
