import BrokerProtocol
import Logging
import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One client connection: checks the peer before reading a byte, splits input into lines (≤ 1 MiB each),
/// runs requests concurrently and writes each answer as soon as it is ready (matched by id, any order).
///
/// Limits, so that one client cannot starve the daemon or the others: each request and each batch member holds one
/// of `maxInFlightPerConnection` slots; input is not read (nor are lines already read handled) while the slots are
/// full or while the client does not take its answers (the channel is not writable); a begun line must end within
/// `lineTimeout`. Everything here runs on the connection's event loop.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase { case checkingPeer, serving, closing }

    private let state: ServerState
    private let router: RequestRouter
    private let table: ConnectionTable
    private let logger: Logger
    private var phase = Phase.checkingPeer
    private var registered = false
    private(set) var peer = PeerIdentity(pid: 0, uid: 0, gid: 0, executable: nil)
    /// The limits as they were when the connection opened (SIGHUP applies to later connections).
    private var limits = ServerSettings()
    private var context: ChannelHandlerContext?
    private var pending = ByteBuffer()
    /// Requests and batch members running (each holds a slot until its answer is written).
    private var inFlight = 0
    /// Batch members that arrived while every slot was taken; started in order as slots free up.
    private var waiting = CircularBuffer<(RPCRequest, BatchAnswers)>()
    private var writable = true
    private var readingPaused = false
    private var handlingLines = false
    private var inputClosed = false
    private(set) var lastActivity: UInt64 = 0
    /// When the current unfinished line began (nil when there is none, or while brokerd is not reading).
    private var partialLineSince: NIODeadline?
    private var lineTimer: Scheduled<Void>?
    /// Notifications and subscriptions of this connection's requests; made on first use.
    private var connectionLink: ConnectionLink?

    init(state: ServerState, router: RequestRouter, table: ConnectionTable, logger: Logger) {
        self.state = state
        self.router = router
        self.table = table
        self.logger = logger
    }

    /// Whether closing this connection loses nothing but an idle socket: nothing running, waiting or subscribed.
    var isEvictable: Bool {
        phase == .serving && inFlight == 0 && waiting.isEmpty && connectionLink?.hasSubscriptions != true
    }

    // MARK: Lifecycle

    func channelActive(context: ChannelHandlerContext) {
        self.context = context
        if state.isDraining {
            closeWith(RPCError(code: RPCErrorCode.shuttingDown, message: "brokerd is shutting down"), context: context)
            return
        }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        PeerCredentials.read(from: context.channel).whenComplete { result in
            handler.value.peerChecked(result, context: boundContext.value)
        }
    }

    private func peerChecked(_ result: Result<PeerIdentity, Error>, context: ChannelHandlerContext) {
        guard phase == .checkingPeer else { return }
        switch result {
        case .failure(let error):
            logger.warning("connection refused: peer credentials unavailable", metadata: ["error": "\(error)"])
            closeWith(RPCError(code: RPCErrorCode.permissionDenied, message: "permission denied: peer credentials unavailable"),
                      context: context)
        case .success(let identity):
            peer = identity
            guard state.isAllowed(identity) else {
                logger.warning("connection refused: peer runs as another user", metadata: [
                    "client_pid": "\(identity.pid)", "client_uid": "\(identity.uid)", "client_exe": "\(identity.executable ?? "?")",
                ])
                closeWith(RPCError(code: RPCErrorCode.permissionDenied, message:
                    "permission denied: brokerd serves uid \(state.ownUID) only; this connection is from uid \(identity.uid)"),
                          context: context)
                return
            }
            admit(context)
        }
    }

    private func admit(_ context: ChannelHandlerContext) {
        limits = state.settings.withLockedValue { $0 }
        lastActivity = table.nextActivityMark()
        if case .refused(let reason) = table.admit(self, settings: limits) {
            logger.warning("connection refused: \(reason)", metadata: [
                "client_pid": "\(peer.pid)", "client_exe": "\(peer.executable ?? "?")",
            ])
            closeWith(RPCError(code: RPCErrorCode.tooManyConnections, message: reason), context: context)
            return
        }
        registered = true
        guard state.register(context.channel) else {
            closeWith(RPCError(code: RPCErrorCode.shuttingDown, message: "brokerd is shutting down"), context: context)
            return
        }
        phase = .serving
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        context.read()
    }

    /// Closed by ConnectionTable to make room for a new connection (this one is idle, with nothing running).
    func evict(reason: String) {
        guard let context, phase == .serving else { return }
        logger.info("closing the longest-idle connection", metadata: ["client_pid": "\(peer.pid)", "reason": "\(reason)"])
        closeWith(RPCError(code: RPCErrorCode.tooManyConnections,
                           message: "too many connections: this idle connection was closed to make \(reason)"),
                  context: context)
    }

    /// Notifications (interactive prompts, subscribed events) go out on this connection as soon as they are made.
    private func link(_ context: ChannelHandlerContext) -> ConnectionLink {
        if let connectionLink { return connectionLink }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let made = ConnectionLink { message, droppable in
            eventLoop.execute {
                let handler = handler.value
                guard handler.phase == .serving, handler.writable || !droppable else { return }
                handler.write(message, context: boundContext.value)
            }
        }
        connectionLink = made
        return made
    }

    func channelInactive(context: ChannelHandlerContext) {
        phase = .closing
        connectionLink?.close()
        lineTimer?.cancel()
        dropWaiting()
        if registered {
            table.remove(self)
            state.release(context.channel)
        }
        self.context = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read, inFlight == 0, waiting.isEmpty,
           connectionLink?.hasSubscriptions != true {
            logger.debug("closing idle connection", metadata: ["client_pid": "\(peer.pid)"])
            context.close(promise: nil)
            return
        }
        if case ChannelEvent.inputClosed = event {
            // No more bytes will come: an unfinished line stays unfinished, and is no reason to close.
            inputClosed = true
            if phase == .closing { return context.close(promise: nil) }
            partialLineSince = nil
            if inFlight == 0, waiting.isEmpty {
                context.close(promise: nil)
                return
            }
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
        lastActivity = table.nextActivityMark()
        handleLines(context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writable = context.channel.isWritable
        // Becoming unwritable inside handleLines (by its own writes) is seen by its loop; anything else acts now.
        if !handlingLines { handleLines(context) }
        context.fireChannelWritabilityChanged()
    }

    /// Whether another line may be handled now: a slot is free and the client takes its answers.
    private var mayTakeWork: Bool { writable && inFlight < limits.maxInFlightPerConnection && waiting.isEmpty }

    /// Handles the complete lines received so far while the connection may take work; the rest stays in `pending`
    /// until answers have gone out. Then reads on or pauses, and watches an unfinished line.
    private func handleLines(_ context: ChannelHandlerContext) {
        guard phase == .serving, !handlingLines else { return }
        handlingLines = true
        defer { handlingLines = false }
        var completedLine = false
        while phase == .serving, mayTakeWork, let length = pending.withUnsafeReadableBytes({ bytes -> Int? in
            guard let base = bytes.baseAddress, let found = memchr(base, Int32(UInt8(ascii: "\n")), bytes.count) else { return nil }
            return base.distance(to: UnsafeRawPointer(found))
        }) {
            if length > limits.maxMessageBytes { return tooLarge(context) }
            var line = pending.readBytes(length: length)!
            pending.moveReaderIndex(forwardBy: 1)
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            completedLine = true
            handleLine(line, context: context)
        }
        guard phase == .serving else { return }
        if mayTakeWork {
            // Only an unfinished line is left.
            if pending.readableBytes > limits.maxMessageBytes { return tooLarge(context) }
            pending.discardReadBytes()
        }
        updateReading(context)
        watchPartialLine(context, lineCompleted: completedLine)
    }

    private func tooLarge(_ context: ChannelHandlerContext) {
        logger.warning("closing connection: message over the size limit", metadata: [
            "client_pid": "\(peer.pid)", "limit_bytes": "\(limits.maxMessageBytes)",
        ])
        closeWith(RPCError(code: RPCErrorCode.messageTooLarge,
                           message: "message larger than \(limits.maxMessageBytes) bytes; the connection is closed"),
                  context: context)
    }

    /// Backpressure: a client that sends faster than it reads answers, or keeps every slot busy, is not read from
    /// until it catches up; a client that never reads then costs at most its slots and the write buffer.
    private func updateReading(_ context: ChannelHandlerContext) {
        let shouldRead = phase == .serving && mayTakeWork
        if !shouldRead, !readingPaused {
            readingPaused = true
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        } else if shouldRead, readingPaused {
            readingPaused = false
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
            context.read()
        }
    }

    /// A begun line must end within `lineTimeout` while brokerd reads (a stalled half request would otherwise hold
    /// its connection until the idle timeout). Time spent paused by brokerd's own backpressure does not count.
    private func watchPartialLine(_ context: ChannelHandlerContext, lineCompleted: Bool) {
        guard pending.readableBytes > 0, !readingPaused, !inputClosed else {
            partialLineSince = nil
            return
        }
        if partialLineSince == nil || lineCompleted { partialLineSince = .now() }
        // One timer at a time, re-armed when it fires early, rather than one per read.
        if lineTimer == nil, let since = partialLineSince { armLineTimer(context, at: since + limits.lineTimeout) }
    }

    private func armLineTimer(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        lineTimer = context.eventLoop.scheduleTask(deadline: deadline) {
            handler.value.lineTimerFired(boundContext.value)
        }
    }

    private func lineTimerFired(_ context: ChannelHandlerContext) {
        lineTimer = nil
        guard phase == .serving, let since = partialLineSince else { return }
        let due = since + limits.lineTimeout
        guard NIODeadline.now() >= due else { return armLineTimer(context, at: due) }
        let seconds = limits.lineTimeout.nanoseconds / 1_000_000_000
        logger.warning("closing connection: a request line was not finished in time", metadata: [
            "client_pid": "\(peer.pid)", "line_timeout_s": "\(seconds)",
        ])
        closeWith(RPCError(code: RPCErrorCode.invalidRequest, message:
            "invalid request: incomplete line (no newline within \(seconds) s of its start); the connection is closed"),
                  context: context)
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
            runSingle(request, context: context)
        case .batch(let items):
            runBatch(items, context: context)
        }
    }

    // MARK: Running requests

    /// A batch's answers, collected as its members finish and written as one array once the last one is done.
    private final class BatchAnswers {
        var answers: [[UInt8]]
        var unfinished: Int

        init(answers: [[UInt8]], unfinished: Int) {
            self.answers = answers
            self.unfinished = unfinished
        }
    }

    private func runSingle(_ request: RPCRequest, context: ChannelHandlerContext) {
        // Counted until the answer is written, so a graceful stop never closes a connection under an answer.
        guard state.begin() else {
            if let id = request.id { write(RPCEnvelope.failure(id: id, error: Self.shuttingDown), context: context) }
            return
        }
        start(request, batch: nil, context: context)
    }

    /// Refuses a batch over `maxBatchSize` whole; otherwise runs its members as slots are free (each member holds one).
    private func runBatch(_ items: [Result<RPCRequest, RPCFailure>], context: ChannelHandlerContext) {
        guard items.count <= limits.maxBatchSize else {
            logger.warning("batch refused: too many members", metadata: [
                "client_pid": "\(peer.pid)", "members": "\(items.count)", "limit": "\(limits.maxBatchSize)",
            ])
            let error = RPCError(code: RPCErrorCode.invalidRequest, message:
                "invalid request: a batch may have at most \(limits.maxBatchSize) members; this one has \(items.count)")
            return write(RPCEnvelope.failure(id: "null", error: error), context: context)
        }
        var requests: [RPCRequest] = [], failures: [[UInt8]] = []
        for item in items {
            switch item {
            case .success(let request): requests.append(request)
            case .failure(let failure): failures.append(RPCEnvelope.failure(id: failure.id, error: failure.error))
            }
        }
        if requests.isEmpty {
            if !failures.isEmpty { write(Self.joinBatch(failures), context: context) }
            return
        }
        guard state.begin() else {
            let answers = failures + requests.compactMap { $0.id.map { RPCEnvelope.failure(id: $0, error: Self.shuttingDown) } }
            if !answers.isEmpty { write(Self.joinBatch(answers), context: context) }
            return
        }
        let batch = BatchAnswers(answers: failures, unfinished: requests.count)
        for request in requests {
            if inFlight < limits.maxInFlightPerConnection, waiting.isEmpty {
                start(request, batch: batch, context: context)
            } else {
                waiting.append((request, batch))
            }
        }
    }

    private static let shuttingDown = RPCError(code: RPCErrorCode.shuttingDown, message: "brokerd is shutting down")

    /// Runs one request (or batch member) off the event loop, holding a slot until it is answered.
    private func start(_ request: RPCRequest, batch: BatchAnswers?, context: ChannelHandlerContext) {
        inFlight += 1
        let router = self.router
        let peer = self.peer
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let boundBatch = batch.map { NIOLoopBound($0, eventLoop: context.eventLoop) }
        let eventLoop = context.eventLoop
        let link = self.link(context)
        Task {
            let answer = await router.answer(request, from: peer, link: link)
            eventLoop.execute {
                handler.value.finished(answer, batch: boundBatch?.value, context: boundContext.value)
            }
        }
    }

    private func finished(_ answer: [UInt8]?, batch: BatchAnswers?, context: ChannelHandlerContext) {
        inFlight -= 1
        lastActivity = table.nextActivityMark()
        if let batch {
            if let answer { batch.answers.append(answer) }
            batch.unfinished -= 1
            if batch.unfinished == 0 {
                if !batch.answers.isEmpty, phase != .closing { write(Self.joinBatch(batch.answers), context: context) }
                state.end()
            }
        } else {
            if let answer, phase != .closing { write(answer, context: context) }
            state.end()
        }
        startWaiting(context)
        if !handlingLines { handleLines(context) }
    }

    private func startWaiting(_ context: ChannelHandlerContext) {
        guard phase == .serving else { return dropWaiting() }
        while inFlight < limits.maxInFlightPerConnection, let (request, batch) = waiting.popFirst() {
            start(request, batch: batch, context: context)
        }
    }

    /// A closed connection's waiting batch members never run; a batch ends (for the shutdown count) once all of
    /// its members have either run or been dropped.
    private func dropWaiting() {
        while let (_, batch) = waiting.popFirst() {
            batch.unfinished -= 1
            if batch.unfinished == 0 { state.end() }
        }
    }

    // MARK: Output

    private func write(_ answer: RememberedAnswer, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: answer.text.answerLineCapacity(id: answer.id,
                                                                                               correlationId: answer.correlationId))
        answer.text.writeAnswerLine(id: answer.id, correlationId: answer.correlationId, newline: true) { buffer.writeBytes($0) }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }

    private func write(_ message: [UInt8], context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: message.count + 1)
        buffer.writeBytes(message)
        buffer.writeInteger(UInt8(ascii: "\n"))
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }

    /// Writes one error line and closes once it is out (a refusal must reach the client before the close), or at
    /// once when the client is not taking output: a client that does not read must not keep its connection open.
    /// Sends the error and closes, lingering: once the error is out, brokerd stops sending (a half-close, so the client
    /// reads the error and then end-of-file) and drops what the client still sends until it closes, for at most
    /// `lingerTime`. Closing a Unix socket while the client's request is unread makes the client's write or read fail
    /// (EPIPE, ECONNRESET), often before it has read the error it was sent.
    private func closeWith(_ error: RPCError, context: ChannelHandlerContext) {
        phase = .closing
        lineTimer?.cancel()
        if registered {  // a lingering connection holds no slot: it counts against no cap and in no status
            registered = false
            table.remove(self)
            state.release(context.channel)
        }
        var buffer = context.channel.allocator.buffer(capacity: 256)
        buffer.writeBytes(RPCEnvelope.failure(id: "null", error: error))
        buffer.writeInteger(UInt8(ascii: "\n"))
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { result in
            guard case .success = result else { return channel.close(promise: nil) }
            channel.close(mode: .output, promise: nil)
            try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
            channel.read()
        }
        // A client that neither reads the error nor closes is closed on anyway.
        context.eventLoop.scheduleTask(in: Self.lingerTime) { channel.close(promise: nil) }
    }

    static let lingerTime = TimeAmount.seconds(1)

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
