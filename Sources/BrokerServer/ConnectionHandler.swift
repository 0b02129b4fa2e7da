import BrokerProtocol
import Logging
import NIOCore

/// One client connection: checks the peer before reading a byte, splits input into lines (≤ 1 MiB each),
/// runs requests concurrently and writes each answer as soon as it is ready (matched by id, any order).
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase { case checkingPeer, serving, closing }

    private let state: ServerState
    private let router: RequestRouter
    private let logger: Logger
    private var phase = Phase.checkingPeer
    private var admitted = false
    private var peer = PeerIdentity(pid: 0, uid: 0, gid: 0, executable: nil)
    private var pending = ByteBuffer()
    private var inFlight = 0
    private var readingPaused = false
    /// Notifications and subscriptions of this connection's requests; made on first use.
    private var connectionLink: ConnectionLink?

    init(state: ServerState, router: RequestRouter, logger: Logger) {
        self.state = state
        self.router = router
        self.logger = logger
    }

    // MARK: Lifecycle

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        guard state.admit(channel) else {
            if state.isDraining {
                refuse(context, RPCError(code: RPCErrorCode.shuttingDown, message: "brokerd is shutting down"))
                return
            }
            let cap = state.settings.withLockedValue { $0.maxConnections }
            logger.warning("connection refused: connection limit reached", metadata: ["max_connections": "\(cap)"])
            refuse(context, RPCError(code: RPCErrorCode.tooManyConnections,
                                     message: "too many connections (limit \(cap)); try again later"))
            return
        }
        admitted = true
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        PeerCredentials.read(from: channel).whenComplete { result in
            handler.value.peerChecked(result, context: boundContext.value)
        }
    }

    private func peerChecked(_ result: Result<PeerIdentity, Error>, context: ChannelHandlerContext) {
        guard phase == .checkingPeer else { return }
        switch result {
        case .failure(let error):
            logger.warning("connection refused: peer credentials unavailable", metadata: ["error": "\(error)"])
            refuse(context, RPCError(code: RPCErrorCode.permissionDenied, message: "permission denied: peer credentials unavailable"))
        case .success(let identity):
            peer = identity
            guard state.isAllowed(identity) else {
                logger.warning("connection refused: peer runs as another user", metadata: [
                    "client_pid": "\(identity.pid)", "client_uid": "\(identity.uid)", "client_exe": "\(identity.executable ?? "?")",
                ])
                refuse(context, RPCError(code: RPCErrorCode.permissionDenied, message:
                    "permission denied: brokerd serves uid \(state.ownUID) only; this connection is from uid \(identity.uid)"))
                return
            }
            phase = .serving
            let channel = context.channel
            channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in channel.close(promise: nil) }
            context.read()
        }
    }

    /// Notifications (interactive prompts, subscribed events) go out on this connection as soon as they are made.
    private func link(_ context: ChannelHandlerContext) -> ConnectionLink {
        if let connectionLink { return connectionLink }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let made = ConnectionLink { message in
            eventLoop.execute {
                guard handler.value.phase == .serving else { return }
                handler.value.write(message, context: boundContext.value)
            }
        }
        connectionLink = made
        return made
    }

    func channelInactive(context: ChannelHandlerContext) {
        phase = .closing
        connectionLink?.close()
        if admitted { state.release(context.channel) }
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read, inFlight == 0,
           connectionLink?.hasSubscriptions != true {
            logger.debug("closing idle connection", metadata: ["client_pid": "\(peer.pid)"])
            context.close(promise: nil)
            return
        }
        if case ChannelEvent.inputClosed = event, inFlight == 0 {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    // MARK: Input

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard phase == .serving else { return }
        var incoming = unwrapInboundIn(data)
        pending.writeBuffer(&incoming)
        let limit = state.settings.withLockedValue { $0.maxMessageBytes }
        while phase == .serving, let newline = pending.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - pending.readerIndex
            if length > limit { return tooLarge(context, limit) }
            var line = pending.readBytes(length: length)!
            pending.moveReaderIndex(forwardBy: 1)
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            handleLine(line, context: context)
        }
        if pending.readableBytes > limit { return tooLarge(context, limit) }
        pending.discardReadBytes()
    }

    private func tooLarge(_ context: ChannelHandlerContext, _ limit: Int) {
        logger.warning("closing connection: message over the size limit", metadata: [
            "client_pid": "\(peer.pid)", "limit_bytes": "\(limit)",
        ])
        refuse(context, RPCError(code: RPCErrorCode.messageTooLarge,
                                 message: "message larger than \(limit) bytes; the connection is closed"))
    }

    private func handleLine(_ line: [UInt8], context: ChannelHandlerContext) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }
        // A request asked before, whose answer still holds, is answered before it is even parsed.
        if state.begin() {
            let answer = router.rememberedAnswer(line, from: peer)
            if let answer { write(answer, context: context) }
            state.end(served: answer != nil)
            if answer != nil { return }
        }
        switch RPCEnvelope.parse(line) {
        case .unusable(let error):
            write(RPCEnvelope.failure(id: "null", error: error), context: context)
        case .single(.failure(let failure)):
            write(RPCEnvelope.failure(id: failure.id, error: failure.error), context: context)
        case .single(.success(let request)):
            // A cache hit is answered here, on the event loop; anything else goes to a task.
            if state.begin() {
                let answer = router.cachedAnswer(request, line: line, from: peer)
                if let answer { write(answer, context: context) }
                state.end(served: answer != nil)
                if answer != nil { return }
            }
            run([request], failures: [], batch: false, context: context)
        case .batch(let items):
            var requests: [RPCRequest] = [], failures: [[UInt8]] = []
            for item in items {
                switch item {
                case .success(let request): requests.append(request)
                case .failure(let failure): failures.append(RPCEnvelope.failure(id: failure.id, error: failure.error))
                }
            }
            run(requests, failures: failures, batch: true, context: context)
        }
    }

    /// Runs requests off the event loop; a batch is answered as one array once all its members are done.
    private func run(_ requests: [RPCRequest], failures: [[UInt8]], batch: Bool, context: ChannelHandlerContext) {
        if requests.isEmpty {
            if !failures.isEmpty { write(Self.joinBatch(failures), context: context) }
            return
        }
        // Counted until the answer is written, so a graceful stop never closes a connection under an answer.
        guard state.begin() else {
            let error = RPCError(code: RPCErrorCode.shuttingDown, message: "brokerd is shutting down")
            let answers = failures + requests.compactMap { $0.id.map { RPCEnvelope.failure(id: $0, error: error) } }
            if !answers.isEmpty { write(batch ? Self.joinBatch(answers) : answers[0], context: context) }
            return
        }
        inFlight += 1
        updateReading(context)
        let router = self.router
        let peer = self.peer
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let link = self.link(context)
        Task {
            let output = await ConnectionHandler.answers(requests, failures: failures, batch: batch, router: router, peer: peer,
                                                         link: link)
            eventLoop.execute {
                handler.value.finished(output, context: boundContext.value)
            }
        }
    }

    private static func answers(_ requests: [RPCRequest], failures: [[UInt8]], batch: Bool,
                                router: RequestRouter, peer: PeerIdentity,
                                link: ConnectionLink) async -> [UInt8]? {
        guard batch else { return await router.answer(requests[0], from: peer, link: link) }
        var answers = failures
        await withTaskGroup(of: [UInt8]?.self) { group in
            for request in requests { group.addTask { await router.answer(request, from: peer, link: link) } }
            for await answer in group { if let answer { answers.append(answer) } }
        }
        return answers.isEmpty ? nil : joinBatch(answers)
    }

    private func finished(_ output: [UInt8]?, context: ChannelHandlerContext) {
        inFlight -= 1
        if let output, phase != .closing { write(output, context: context) }
        state.end()
        updateReading(context)
    }

    /// Backpressure: a client that keeps sending without reading answers is not read from until it catches up.
    private func updateReading(_ context: ChannelHandlerContext) {
        guard phase == .serving else { return }
        let cap = state.settings.withLockedValue { $0.maxInFlightPerConnection }
        if inFlight >= cap, !readingPaused {
            readingPaused = true
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        } else if inFlight < cap, readingPaused {
            readingPaused = false
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
            context.read()
        }
    }

    // MARK: Output

    private func write(_ message: [UInt8], context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: message.count + 1)
        buffer.writeBytes(message)
        buffer.writeInteger(UInt8(ascii: "\n"))
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }

    /// Writes one error line and closes once it is out (a refusal must reach the client before the close).
    private func refuse(_ context: ChannelHandlerContext, _ error: RPCError) {
        phase = .closing
        var buffer = context.channel.allocator.buffer(capacity: 256)
        buffer.writeBytes(RPCEnvelope.failure(id: "null", error: error))
        buffer.writeInteger(UInt8(ascii: "\n"))
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }

    private static func joinBatch(_ answers: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (index, answer) in answers.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: answer)
        }
        out.append(UInt8(ascii: "]"))
        return out
    }
}
