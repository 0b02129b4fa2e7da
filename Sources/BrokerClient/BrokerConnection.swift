import BrokerJSON
import BrokerProtocol
import NIOCore
import NIOPosix

/// Why a call to brokerd did not produce a result (the transport's view; `BrokerError` is the app's).
public enum BrokerClientError: Error, Sendable, CustomStringConvertible {
    /// Nothing answers on the socket (no daemon, or it is not socket-activated).
    case brokerNotRunning(socket: String, reason: String)
    /// brokerd answered with a JSON-RPC error.
    case rpc(RPCError)
    /// The connection broke or brokerd sent something that is not a JSON-RPC answer.
    case connection(String)
    /// brokerd speaks another major protocol version (checked on each new connection when asked to).
    case incompatibleBroker(protocolVersion: String)

    public var description: String {
        switch self {
        case .brokerNotRunning(let socket, let reason):
            return "brokerd is not running at \(socket) (\(reason))"
        case .rpc(let error): return error.message
        case .connection(let why): return "connection to brokerd failed: \(why)"
        case .incompatibleBroker(let version):
            return "brokerd speaks protocol \(version); this client speaks \(brokerProtocolVersion) (the major versions must match)"
        }
    }
}

/// How a call failed on the wire: whether sending it again could run it twice.
enum WireFailure: Error {
    /// The request never left: the connection was already closed.
    case notSent(String)
    /// The connection closed after the request was written and before its answer.
    case lostAfterSending(String)
}

/// A connection to brokerd: JSON-RPC 2.0 over the Unix socket, one request per line.
///
/// Calls share one connection and run concurrently (brokerd answers by id, in any order). The socket is opened on
/// first use and reopened when brokerd has closed it, so a restarted daemon is picked up by the next call. A call
/// that never left is sent again; one that lost its connection after leaving is sent again only when running it
/// twice is harmless (reads and silent token requests); one refused because brokerd is stopping is sent again after
/// a pause. An interactive sign-in gets a connection of its own: its prompts carry no request id.
public actor BrokerConnection {
    public let socketPath: String
    private let timeoutSeconds: Int
    private let checksProtocolVersion: Bool
    private let blockingCalls: Bool
    private var shared: Opened?
    /// With `blockingCalls`: the connection, and the id of a `getBrokerVersion` whose answer has not been read yet.
    private var line: BlockingLine?
    private var unreadVersionCheck: Int?
    private var opening: Task<Opened, Error>?
    private var nextId = 1

    /// A notification brokerd sent (`browserUrl`, `deviceCode`, or an event): method and raw params JSON.
    public typealias NotificationHandler = @Sendable (_ method: String, _ params: [UInt8]) -> Void
    /// Asked when the task of a call with its own connection is cancelled: a request (method, params JSON) to send
    /// on that connection to end the call at brokerd, or nil to drop the connection at once.
    public typealias CancelRequest = @Sendable () -> (method: String, paramsJSON: [UInt8])?

    /// Methods that may run twice without harm, so a call that lost its connection may be sent again.
    static let idempotent: Set<String> = [
        BrokerMethod.getBrokerVersion, .getStatus, .getAccounts, .getAccount, .acquireTokenSilently, .exportCache,
    ].reduce(into: []) { $0.insert($1.rawValue) }

    /// `socketPath` nil resolves like brokerd does: `$BROKERD_SOCKET`, else `$XDG_RUNTIME_DIR/brokerd/brokerd.sock`.
    /// With `checkProtocolVersion`, each new connection first asks `getBrokerVersion` and is refused
    /// (`incompatibleBroker`) unless the major version is this library's. The question goes out as the connection
    /// opens. A call that only reads (`idempotent`) goes out right behind it, and its answer is returned once the
    /// version has been found compatible; any other call is sent only then.
    ///
    /// `blockingCalls`: calls without notifications are made with plain blocking system calls on the calling thread,
    /// and no SwiftNIO thread is started for them. For short-lived command-line tools that make a call or two and
    /// exit (`brokerctl token`), where starting the event loop costs more than the calls. Not for apps: each call
    /// holds its thread until brokerd answers. Interactive calls and `events` use SwiftNIO either way.
    public init(socketPath: String? = nil, timeoutSeconds: Int = 120, checkProtocolVersion: Bool = false,
                blockingCalls: Bool = false) {
        self.socketPath = SocketLocation.resolve(explicit: socketPath)
        self.timeoutSeconds = timeoutSeconds
        self.checksProtocolVersion = checkProtocolVersion
        self.blockingCalls = blockingCalls
    }

    /// A connection and, when the protocol version is checked, the check under way on it: `getBrokerVersion` is
    /// sent as the connection opens, and the first call goes out right behind it instead of a round trip later.
    private struct Opened {
        var channel: Channel
        var versionCheck: EventLoopFuture<Void>?
    }

    deinit {
        shared?.channel.close(promise: nil)
    }

    /// Calls `method` with `params` and decodes the result as `Result`.
    public func call<Params: Encodable & Sendable, Result: Decodable & Sendable>(_ method: BrokerMethod, _ params: Params,
                                                                             as type: Result.Type) async throws -> Result {
        let resultJSON = try await callRaw(method.rawValue, paramsJSON: try Self.encode(params))
        return try Self.decode(type, resultJSON, method)
    }

    public func call<Result: Decodable & Sendable>(_ method: BrokerMethod, as type: Result.Type) async throws -> Result {
        try await call(method, NoParams(), as: type)
    }

    /// Calls `method` on a connection of its own, handing the notifications that arrive before the answer to
    /// `onNotification` (on a SwiftNIO thread: do not block in it). `timeoutSeconds` bounds the wait for the answer
    /// (interactive sign-ins take minutes).
    ///
    /// When the calling task is cancelled, `onCancel` may name a request that ends the call at brokerd (sent on the
    /// same connection); the call then waits up to 5 s for brokerd's answer. Otherwise, or after those 5 s, the call
    /// ends with `CancellationError` and its connection is closed (brokerd then cancels a sign-in of that connection).
    public func call<Params: Encodable & Sendable, Result: Decodable & Sendable>(
        _ method: BrokerMethod, _ params: Params, as type: Result.Type, timeoutSeconds: Int,
        onNotification: @escaping NotificationHandler, onCancel: CancelRequest? = nil) async throws -> Result {
        let resultJSON = try await callRaw(method.rawValue, paramsJSON: try Self.encode(params),
                                           timeoutSeconds: timeoutSeconds, onNotification: onNotification, onCancel: onCancel)
        return try Self.decode(type, resultJSON, method)
    }

    /// Sends one request and returns the raw JSON of its result.
    public func callRaw(_ method: String, paramsJSON: [UInt8], timeoutSeconds: Int? = nil,
                        onNotification: NotificationHandler? = nil, onCancel: CancelRequest? = nil) async throws -> [UInt8] {
        let timeout = TimeAmount.seconds(Int64(timeoutSeconds ?? self.timeoutSeconds))
        if let onNotification {
            let opened = try await open(onEvent: nil)
            defer { opened.channel.close(promise: nil) }
            do {
                try await Self.verify(opened.versionCheck, before: true)
                return try await send(method, paramsJSON, on: opened.channel, timeout: timeout, onNotification: onNotification,
                                      onCancel: onCancel)
            } catch let failure as WireFailure {
                throw Self.public(failure)
            }
        }
        var attempt = 0
        while true {
            attempt += 1
            do {
                if blockingCalls {
                    do { return try blockingCall(method, paramsJSON, timeoutSeconds: timeoutSeconds ?? self.timeoutSeconds) } catch {
                        line = nil  // a failed call leaves the connection in no known state
                        unreadVersionCheck = nil
                        throw error
                    }
                }
                let opened = try await sharedChannel()
                // A call that changes something waits for the version check; a read goes out at once, and its answer
                // counts only once the check has passed (running it on another brokerd did no harm).
                let harmless = Self.idempotent.contains(method)
                if !harmless { try await checked(opened, before: true) }
                let answer: [UInt8]
                do { answer = try await send(method, paramsJSON, on: opened.channel, timeout: timeout, onNotification: nil) } catch {
                    if harmless { try await checked(opened, before: false) }  // a failed check says more
                    throw error
                }
                if harmless { try await checked(opened, before: false) }
                return answer
            } catch WireFailure.notSent(let why) {
                if attempt >= 3 { throw BrokerClientError.connection(why) }
            } catch WireFailure.lostAfterSending(let why) {
                guard attempt == 1, Self.idempotent.contains(method) else { throw BrokerClientError.connection(why) }
            } catch BrokerClientError.rpc(let refusal)
                where attempt < 3 && [RPCErrorCode.shuttingDown, RPCErrorCode.tooManyConnections].contains(refusal.code) {
                // Not run: brokerd is stopping (a restart) or full. Its successor, or a free slot, may take it.
                try await Task.sleep(nanoseconds: attempt == 1 ? 200_000_000 : 1_000_000_000)
            }
        }
    }

    /// Subscribes to broker events on a connection of their own. The stream ends with an error when the connection
    /// does (brokerd stopped): subscribe again to go on.
    public func events(_ names: [String]? = nil) async throws -> AsyncThrowingStream<(method: String, params: [UInt8]), Error> {
        let (stream, continuation) = AsyncThrowingStream<(method: String, params: [UInt8]), Error>.makeStream()
        let opened = try await open(onEvent: { method, params in continuation.yield((method, params)) },
                                    onClose: { error in continuation.finish(throwing: error) })
        let channel = opened.channel
        continuation.onTermination = { _ in channel.close(promise: nil) }
        do {
            try await Self.verify(opened.versionCheck, before: true)
            _ = try await send(BrokerMethod.subscribe.rawValue, try Self.encode(SubscribeParams(events: names)), on: channel,
                               timeout: .seconds(Int64(timeoutSeconds)), onNotification: nil)
        } catch {
            channel.close(promise: nil)
            throw (error as? WireFailure).map(Self.public) ?? error
        }
        return stream
    }

    /// Closes the shared connection (calls in flight on it fail); the next call opens a new one.
    public func disconnect() {
        shared?.channel.close(promise: nil)
        shared = nil
        line = nil
        unreadVersionCheck = nil
    }

    // MARK: Blocking calls

    /// One attempt of a call on the blocking connection (opened, and its version check sent, on first use).
    private func blockingCall(_ method: String, _ paramsJSON: [UInt8], timeoutSeconds: Int) throws -> [UInt8] {
        let connection: BlockingLine
        if let line { connection = line } else {
            connection = try BlockingLine(socketPath: socketPath)
            line = connection
            if checksProtocolVersion {
                unreadVersionCheck = nextId
                try send(RPCEnvelope.request(id: nextId, method: BrokerMethod.getBrokerVersion.rawValue,
                                             paramsJSON: try Self.encode(NoParams())), on: connection)
                nextId += 1
            }
        }
        // As on SwiftNIO: only a read goes out before the version is known to be compatible.
        if unreadVersionCheck != nil, !Self.idempotent.contains(method) {
            do { _ = try readAnswer(to: nil, on: connection, timeoutSeconds: timeoutSeconds) } catch WireFailure.lostAfterSending(let why) {
                throw WireFailure.notSent(why)  // the call itself was not written
            }
        }
        let id = nextId
        nextId += 1
        try send(RPCEnvelope.request(id: id, method: method, paramsJSON: paramsJSON), on: connection)
        return try readAnswer(to: id, on: connection, timeoutSeconds: timeoutSeconds)
    }

    private func send(_ request: [UInt8], on connection: BlockingLine) throws {
        do { try connection.write(request) } catch {
            // brokerd refuses some connections at once and closes them (another user, too many connections, stopping):
            // its refusal is then waiting to be read, and says more than the broken pipe.
            if let waiting = try? connection.readLine(timeoutSeconds: 0),
               case .connectionRefused(let refusal) = RPCClientHandler.parse(waiting) {
                throw BrokerClientError.rpc(refusal)
            }
            throw error
        }
    }

    /// Reads lines until the answer to `id` (nil: only the version check's) has come and the version check has
    /// passed. Notifications and answers to abandoned ids are skipped.
    private func readAnswer(to id: Int?, on connection: BlockingLine, timeoutSeconds: Int) throws -> [UInt8] {
        var answer: Result<[UInt8], Error>?
        while unreadVersionCheck != nil || (id != nil && answer == nil) {
            switch RPCClientHandler.parse(try connection.readLine(timeoutSeconds: timeoutSeconds)) {
            case .answer(let answerId, let outcome) where answerId == unreadVersionCheck:
                try Self.checkVersion(try outcome.get())
                unreadVersionCheck = nil
            case .answer(let answerId, let outcome) where answerId == id:
                answer = outcome
            case .answer, .notification:
                continue
            case .connectionRefused(let error):
                throw BrokerClientError.rpc(error)
            case .invalid(let why):
                throw BrokerClientError.connection("brokerd sent invalid JSON: \(why)")
            }
        }
        return try answer?.get() ?? []
    }

    // MARK: Wire

    private func sharedChannel() async throws -> Opened {
        if let shared, shared.channel.isActive { return shared }
        // Calls that arrive while the connection is being opened wait for that one instead of opening their own.
        if let opening { return try await opening.value }
        let task = Task { try await self.open(onEvent: nil) }
        opening = task
        defer { opening = nil }
        let opened = try await task.value
        shared?.channel.close(promise: nil)
        shared = opened
        return opened
    }

    /// Waits for the shared connection's version check; a connection that fails it is closed and forgotten.
    private func checked(_ opened: Opened, before sending: Bool) async throws {
        do { try await Self.verify(opened.versionCheck, before: sending) } catch {
            opened.channel.close(promise: nil)
            if shared?.channel === opened.channel { shared = nil }
            throw error
        }
    }

    /// The outcome of a version check. A connection lost before its answer: the call waiting `before` sending was
    /// never sent.
    private static func verify(_ check: EventLoopFuture<Void>?, before sending: Bool) async throws {
        guard let check else { return }
        do { try await check.get() } catch let failure as WireFailure {
            guard sending, case .lostAfterSending(let why) = failure else { throw failure }
            throw WireFailure.notSent(why)
        }
    }

    private func open(onEvent: NotificationHandler?,
                      onClose: (@Sendable (BrokerClientError) -> Void)? = nil) async throws -> Opened {
        let fd = try UnixSocket.connect(to: socketPath)
        let channel: Channel
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)  // see RPCClientHandler.refusalGrace
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineDecoder()))
                        try channel.pipeline.syncOperations.addHandler(RPCClientHandler(onEvent: onEvent, onClose: onClose))
                    }
                }
                .withConnectedSocket(fd)
                .get()
        } catch {
            throw BrokerClientError.connection("cannot set up the connection: \(error)")
        }
        guard checksProtocolVersion else { return Opened(channel: channel, versionCheck: nil) }
        let (_, answer) = write(BrokerMethod.getBrokerVersion.rawValue, try Self.encode(NoParams()), on: channel,
                                timeout: .seconds(Int64(timeoutSeconds)), onNotification: nil)
        let check = answer.futureResult.flatMapThrowing { try Self.checkVersion($0) }
        check.whenFailure { _ in channel.close(promise: nil) }
        return Opened(channel: channel, versionCheck: check)
    }

    /// Writes one request; its answer (or why there is none) completes the promise.
    private func write(_ method: String, _ paramsJSON: [UInt8], on channel: Channel, timeout: TimeAmount,
                       onNotification: NotificationHandler?) -> (id: Int, answer: EventLoopPromise<[UInt8]>) {
        let id = nextId
        nextId += 1
        let answer = channel.eventLoop.makePromise(of: [UInt8].self)
        let call = OutgoingCall(id: id, line: RPCEnvelope.request(id: id, method: method, paramsJSON: paramsJSON),
                                timeout: timeout, answer: answer, onNotification: onNotification)
        channel.writeAndFlush(call).whenFailure { _ in
            answer.fail(WireFailure.notSent("brokerd closed the connection"))
        }
        return (id, answer)
    }

    private func send(_ method: String, _ paramsJSON: [UInt8], on channel: Channel, timeout: TimeAmount,
                      onNotification: NotificationHandler?, onCancel: CancelRequest? = nil) async throws -> [UInt8] {
        try Task.checkCancellation()
        let (id, answer) = write(method, paramsJSON, on: channel, timeout: timeout, onNotification: onNotification)
        return try await withTaskCancellationHandler {
            try await answer.futureResult.get()
        } onCancel: {
            guard let request = onCancel?() else {
                channel.triggerUserOutboundEvent(AbandonCall(id: id), promise: nil)
                return
            }
            // The cancel request shares the connection of the call it ends; its own answer is not awaited.
            let cancelId = -id
            let ignored = channel.eventLoop.makePromise(of: [UInt8].self)
            channel.writeAndFlush(OutgoingCall(id: cancelId, line: RPCEnvelope.request(id: cancelId, method: request.method,
                                                                                     paramsJSON: request.paramsJSON),
                                               timeout: .seconds(5), answer: ignored, onNotification: nil)).whenFailure { _ in
                ignored.fail(CancellationError())
            }
            channel.eventLoop.scheduleTask(in: .seconds(5)) {
                channel.triggerUserOutboundEvent(AbandonCall(id: id), promise: nil)
            }
        }
    }

    /// Refuses a `getBrokerVersion` result of another major protocol version.
    private static func checkVersion(_ resultJSON: [UInt8]) throws {
        let version = try decode(BrokerVersionResult.self, resultJSON, .getBrokerVersion).protocolVersion
        guard major(version) == major(brokerProtocolVersion) else {
            throw BrokerClientError.incompatibleBroker(protocolVersion: version)
        }
    }

    static func major(_ version: String) -> Substring {
        version.split(separator: ".", maxSplits: 1).first ?? ""
    }

    private static func `public`(_ failure: WireFailure) -> BrokerClientError {
        switch failure {
        case .notSent(let why), .lostAfterSending(let why): return .connection(why)
        }
    }

    private static func encode<Params: Encodable>(_ params: Params) throws -> [UInt8] {
        do { return try ProtocolCoding.encode(params) } catch {
            throw BrokerClientError.connection("cannot encode params: \(error)")
        }
    }

    private static func decode<Result: Decodable>(_ type: Result.Type, _ json: [UInt8], _ method: BrokerMethod) throws -> Result {
        do { return try ProtocolCoding.decode(type, from: json) } catch {
            throw BrokerClientError.connection("unexpected \(method.rawValue) result: \(ProtocolCoding.describe(error))")
        }
    }
}
