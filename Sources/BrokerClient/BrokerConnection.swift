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

    public var description: String {
        switch self {
        case .brokerNotRunning(let socket, let reason):
            return "brokerd is not running at \(socket) (\(reason))"
        case .rpc(let error): return error.message
        case .connection(let why): return "connection to brokerd failed: \(why)"
        }
    }
}

/// A connection to brokerd: JSON-RPC 2.0 over the Unix socket, one request per line.
///
/// Calls share one connection and run concurrently (brokerd answers by id, in any order). The socket is opened on
/// first use and reopened when brokerd has closed it, so a restarted daemon is picked up by the next call; a call
/// that loses its connection before the answer is sent again once on a new one, except an interactive sign-in.
/// An interactive sign-in gets a connection of its own: its prompts carry no request id.
public actor BrokerConnection {
    public let socketPath: String
    private let timeoutSeconds: Int
    private var shared: Channel?
    private var nextId = 1

    /// A notification brokerd sent (`browserUrl`, `deviceCode`, or an event): method and raw params JSON.
    public typealias NotificationHandler = @Sendable (_ method: String, _ params: [UInt8]) -> Void

    /// `socketPath` nil resolves like brokerd does: `$BROKERD_SOCKET`, else `$XDG_RUNTIME_DIR/brokerd/brokerd.sock`.
    public init(socketPath: String? = nil, timeoutSeconds: Int = 120) {
        self.socketPath = SocketLocation.resolve(explicit: socketPath)
        self.timeoutSeconds = timeoutSeconds
    }

    deinit {
        shared?.close(promise: nil)
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
    /// `onNotification`. `timeoutSeconds` bounds the wait for the answer (interactive sign-ins take minutes).
    ///
    /// When the calling task is cancelled, `onCancel` may ask brokerd to end the request and return true: the call
    /// then waits for brokerd's answer. Otherwise the call ends at once with `CancellationError` and its connection
    /// is closed (brokerd then cancels an interactive sign-in of that connection itself).
    public func call<Params: Encodable & Sendable, Result: Decodable & Sendable>(_ method: BrokerMethod, _ params: Params, as type: Result.Type,
                                                           timeoutSeconds: Int,
                                                           onNotification: @escaping NotificationHandler,
                                                           onCancel: (@Sendable () -> Bool)? = nil) async throws -> Result {
        let resultJSON = try await callRaw(method.rawValue, paramsJSON: try Self.encode(params),
                                           timeoutSeconds: timeoutSeconds, onNotification: onNotification, onCancel: onCancel)
        return try Self.decode(type, resultJSON, method)
    }

    /// Sends one request and returns the raw JSON of its result.
    public func callRaw(_ method: String, paramsJSON: [UInt8], timeoutSeconds: Int? = nil,
                        onNotification: NotificationHandler? = nil,
                        onCancel: (@Sendable () -> Bool)? = nil) async throws -> [UInt8] {
        let timeout = TimeAmount.seconds(Int64(timeoutSeconds ?? self.timeoutSeconds))
        if let onNotification {
            let channel = try await open(onEvent: nil)
            defer { channel.close(promise: nil) }
            return try await send(method, paramsJSON, on: channel, timeout: timeout, onNotification: onNotification,
                                  onCancel: onCancel)
        }
        let resendable = method != BrokerMethod.acquireTokenInteractively.rawValue
        var attempt = 0
        while true {
            let channel = try await sharedChannel()
            do {
                return try await send(method, paramsJSON, on: channel, timeout: timeout, onNotification: nil)
            } catch BrokerClientError.connection(let why) where attempt == 0 && resendable && !channel.isActive {
                // brokerd went away between our check and its answer (a restart): once more, on a new connection.
                _ = why
                attempt += 1
            }
        }
    }

    /// Subscribes to broker events on a connection of their own. The stream ends with an error when the connection
    /// does (brokerd stopped): subscribe again to go on.
    public func events(_ names: [String]? = nil) async throws -> AsyncThrowingStream<(method: String, params: [UInt8]), Error> {
        let (stream, continuation) = AsyncThrowingStream<(method: String, params: [UInt8]), Error>.makeStream()
        let channel = try await open(onEvent: { method, params in continuation.yield((method, params)) },
                                     onClose: { error in continuation.finish(throwing: error) })
        continuation.onTermination = { _ in channel.close(promise: nil) }
        do {
            _ = try await send(BrokerMethod.subscribe.rawValue, try Self.encode(SubscribeParams(events: names)), on: channel,
                               timeout: .seconds(Int64(timeoutSeconds)), onNotification: nil)
        } catch {
            channel.close(promise: nil)
            throw error
        }
        return stream
    }

    public func disconnect() {
        shared?.close(promise: nil)
        shared = nil
    }

    // MARK: Wire

    private func sharedChannel() async throws -> Channel {
        if let shared, shared.isActive { return shared }
        let channel = try await open(onEvent: nil)
        shared = channel
        return channel
    }

    private func open(onEvent: NotificationHandler?,
                      onClose: (@Sendable (BrokerClientError) -> Void)? = nil) async throws -> Channel {
        let fd = try UnixSocket.connect(to: socketPath)
        do {
            return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
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
    }

    private func send(_ method: String, _ paramsJSON: [UInt8], on channel: Channel, timeout: TimeAmount,
                      onNotification: NotificationHandler?, onCancel: (@Sendable () -> Bool)? = nil) async throws -> [UInt8] {
        let id = nextId
        nextId += 1
        let answer = channel.eventLoop.makePromise(of: [UInt8].self)
        let call = OutgoingCall(id: id, line: RPCEnvelope.request(id: id, method: method, paramsJSON: paramsJSON),
                                timeout: timeout, answer: answer, onNotification: onNotification)
        channel.writeAndFlush(call).whenFailure { error in
            answer.fail(BrokerClientError.connection("brokerd closed the connection (\(error))"))
        }
        return try await withTaskCancellationHandler {
            try await answer.futureResult.get()
        } onCancel: {
            if onCancel?() == true { return }
            channel.triggerUserOutboundEvent(AbandonCall(id: id), promise: nil)
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
