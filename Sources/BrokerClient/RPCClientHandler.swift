import BrokerJSON
import BrokerProtocol
import NIOCore

/// A request on its way to brokerd, with where its answer goes.
struct OutgoingCall: Sendable {
    var id: Int
    var line: [UInt8]
    var timeout: TimeAmount
    var answer: EventLoopPromise<[UInt8]>
    var onNotification: BrokerConnection.NotificationHandler?
}

/// Asks the handler to forget a call whose caller went away (task cancelled).
struct AbandonCall: Sendable {
    var id: Int
}

/// Splits brokerd's output into lines. Answers can be large (an exported cache), but not endless.
struct LineDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer
    static let maximumLine = 64 << 20

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let newline = buffer.readableBytesView.firstIndex(of: 0x0A) else {
            if buffer.readableBytes > Self.maximumLine { throw BrokerClientError.connection("brokerd sent a line over 64 MiB") }
            return .needMoreData
        }
        let line = buffer.readSlice(length: newline - buffer.readerIndex)!
        buffer.moveReaderIndex(forwardBy: 1)
        context.fireChannelRead(wrapInboundOut(line))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }
}

/// Matches brokerd's answers to requests by id, so that many calls share one connection and may be answered out of
/// order. Notifications (which carry no id) go to the call that asked for them — a connection that runs an
/// interactive request runs only that one — or to `onEvent` on a subscribed connection.
final class RPCClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = OutgoingCall
    typealias OutboundOut = ByteBuffer

    private struct Pending {
        var answer: EventLoopPromise<[UInt8]>
        var onNotification: BrokerConnection.NotificationHandler?
        var timeout: Scheduled<Void>?
    }

    private var pending: [Int: Pending] = [:]
    private var closed = false
    /// brokerd's refusal of the whole connection (an error with id null), kept because it may arrive before any
    /// request was written: every call of this connection fails with it, not with "closed".
    private var refusal: RPCError?
    private let onEvent: BrokerConnection.NotificationHandler?
    private let onClose: (@Sendable (BrokerClientError) -> Void)?

    init(onEvent: BrokerConnection.NotificationHandler? = nil, onClose: (@Sendable (BrokerClientError) -> Void)? = nil) {
        self.onEvent = onEvent
        self.onClose = onClose
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let call = unwrapOutboundIn(data)
        let id = call.id
        promise?.succeed()
        // A write can still reach this handler after channelInactive (the pipeline is torn down a moment later):
        // nothing would ever answer it.
        if let refusal {
            call.answer.fail(BrokerClientError.rpc(refusal))
            return
        }
        guard !closed, context.channel.isActive else {
            call.answer.fail(WireFailure.notSent("brokerd closed the connection"))
            return
        }
        let timeout = context.eventLoop.assumeIsolated().scheduleTask(in: call.timeout) { [weak self] in
            let seconds = call.timeout.nanoseconds / 1_000_000_000
            self?.finish(id, .failure(BrokerClientError.connection("no answer from brokerd within \(seconds) s")))
        }
        pending[id] = Pending(answer: call.answer, onNotification: call.onNotification, timeout: timeout)
        var buffer = context.channel.allocator.buffer(capacity: call.line.count + 1)
        buffer.writeBytes(call.line)
        buffer.writeInteger(UInt8(0x0A))
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenFailure { [weak self] error in
            self?.finish(id, .failure(WireFailure.lostAfterSending("brokerd closed the connection (\(error))")))
        }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: written)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if let abandon = event as? AbandonCall {
            finish(abandon.id, .failure(CancellationError()))
            promise?.succeed()
        } else {
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let line = Array(unwrapInboundIn(data).readableBytesView)
        switch Self.parse(line) {
        case .answer(let id, let outcome):
            finish(id, outcome)
        case .connectionRefused(let error):
            // id null: the connection itself was refused (peer check, connection cap, oversized message).
            closed = true
            refusal = error
            failAll(BrokerClientError.rpc(error))
        case .notification(let method, let params):
            if let handler = pending.values.first(where: { $0.onNotification != nil })?.onNotification {
                handler(method, params)
            } else {
                onEvent?(method, params)
            }
        case .invalid(let why):
            closed = true
            failAll(BrokerClientError.connection("brokerd sent invalid JSON: \(why)"))
            context.close(promise: nil)
        }
    }

    /// The channel allows a half-close, so brokerd's end-of-file arrives here. After a refusal, the channel stays open
    /// for `refusalGrace`: the refusal can arrive before the first request is written (brokerd refuses on connect),
    /// and a request written meanwhile then fails with it, not with "closed the connection".
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case ChannelEvent.inputClosed = event else { return context.fireUserInboundEventTriggered(event) }
        guard refusal != nil else { return context.close(promise: nil) }
        let channel = context.channel
        context.eventLoop.scheduleTask(in: Self.refusalGrace) { channel.close(promise: nil) }
    }

    static let refusalGrace = TimeAmount.seconds(1)

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        failAll(refusal.map { BrokerClientError.rpc($0) } ?? WireFailure.lostAfterSending("brokerd closed the connection"))
        onClose?(.connection("brokerd closed the connection"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        failAll(error as? BrokerClientError ?? .connection("\(error)"))
        closed = true
        context.close(promise: nil)
    }

    private func finish(_ id: Int, _ outcome: Result<[UInt8], Error>) {
        guard let call = pending.removeValue(forKey: id) else { return }
        call.timeout?.cancel()
        call.answer.completeWith(outcome)
    }

    private func failAll(_ error: Error) {
        for id in Array(pending.keys) { finish(id, .failure(error)) }
    }

    // MARK: Reading brokerd's lines

    enum Incoming {
        case answer(id: Int, Result<[UInt8], Error>)
        case connectionRefused(RPCError)
        case notification(method: String, params: [UInt8])
        case invalid(String)
    }

    static func parse(_ line: [UInt8]) -> Incoming {
        var reader = JSONReader(line)
        var answerId: JSONValue?, result: [UInt8]?, error: JSONValue?, method: String?, params: [UInt8] = []
        do {
            try reader.readObject { (key, reader) throws(JSONReadError) in
                switch key {
                case "id": answerId = try reader.readValue()
                case "result": result = Array(line[try reader.readRawRange()])
                case "error": error = try reader.readValue()
                case "method": method = try reader.readValue().stringValue ?? ""
                case "params": params = Array(line[try reader.readRawRange()])
                default: _ = try reader.readValue()
                }
            }
        } catch {
            return .invalid("\(error)")
        }
        if let method { return .notification(method: method, params: params) }
        if let error {
            guard let rpc = RPCError(json: error) else { return .invalid("an error without code and message") }
            guard let id = answerId?.integerValue else { return .connectionRefused(rpc) }
            return .answer(id: Int(id), .failure(BrokerClientError.rpc(rpc)))
        }
        guard let id = answerId?.integerValue else { return .invalid("an answer without a numeric id") }
        guard let result else { return .answer(id: Int(id), .failure(BrokerClientError.connection("answer without result or error"))) }
        return .answer(id: Int(id), .success(result))
    }
}
