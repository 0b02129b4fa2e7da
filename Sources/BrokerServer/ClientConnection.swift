import BrokerCore
import BrokerProtocol
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One client connection on a thread of its own: checks the peer before reading a byte, splits input into lines
/// (≤ 1 MiB each), answers a cache hit at once on this thread, runs any other request as a task, and writes each
/// answer as soon as it is ready (matched by id, any order).
///
/// Why a thread per connection rather than an event loop: a cache hit costs a few microseconds here and the rest
/// is the kernel's read, write and wake-ups. On its own thread each client's hits run on whichever core is free,
/// the way the raw echo server's do, instead of queueing behind one loop; and a hit takes no lock that another
/// connection's hits take (its remembered answers are its own, the counters atomics), since a lock that every
/// thread takes is one that a preempted holder makes them all wait on (docs/performance.md).
///
/// It waits in poll (the socket and an eventfd that other threads post to), except right after a cache hit: the
/// app's next request is then read with one blocking read, bounded at `nextHitWait` (see `readNextHit`).
///
/// Limits, so that one client cannot starve the daemon or the others: each request and each batch member holds one
/// of `maxInFlightPerConnection` slots; input is not read (nor are lines already read handled) while the slots are
/// full or while the client does not take its answers; a begun line must end within `lineTimeout`; a connection
/// with no input for `idleTimeout` and nothing running is closed.
///
/// Everything but the `let`s, `commitments`, `activity` and the inbox is touched only on the connection's thread.
final class ClientConnection: @unchecked Sendable {
    let peer: PeerIdentity
    /// The peer as accepted, its process pinned for the connection's life.
    private let accepted: AcceptedPeer?
    /// Which app is on the other end: worked out once, when the connection starts serving (`AcceptedPeer.identify`).
    var caller: CallerIdentity
    let link: ConnectionLink
    let inbox: ConnectionInbox
    private let fd: Int32
    private let credentialsKnown: Bool
    let state: ServerState
    let router: RequestRouter
    let table: ConnectionTable
    let logger: Logger

    /// Requests running or waiting (each batch member counts); -1 once the table has claimed the connection for
    /// eviction, after which it starts nothing. Only this thread raises it, only from its own count.
    private let commitments = Atomic<Int>(0)
    private let activity = Atomic<UInt64>(0)
    /// Requests answered from `memory`: counted here, on a line no other thread writes, and summed for the status.
    private let rememberedAnswers = Atomic<Int>(0)

    enum Phase {
        case serving
        /// Send this error, stop sending, drop what the client still sends for `lingerTime`, close.
        case refusing(RPCError)
        /// Close without a word: shutdown, idle, the client gone.
        case closing
    }

    var phase = Phase.serving
    var limits = ServerSettings()
    private var registered = false
    /// Bytes read and not yet handled.
    var pending: [UInt8] = []
    private var output: [UInt8] = []
    private var outputSent = 0
    /// Remembered answers and the count of repeated hits for the log.
    var memory = ConnectionMemory()
    /// A cache hit was answered on this thread and nothing else has been asked since: the next request is waited
    /// for in a blocking read (`readNextHit`).
    var awaitsNextHit = false
    /// False from when more than `highWater` bytes of answers wait for the client until they are down to `lowWater`.
    var writable = true
    var inFlight = 0
    /// Batch members that arrived while every slot was taken; started in order as slots free up.
    var waiting = FIFOQueue<(RPCRequest, BatchAnswers)>()
    private var inputClosed = false
    /// Input was read and not all of its lines are handled yet (counted in `commitments`).
    private var holdsInput = false
    /// The client closed its end: nothing is read or polled any more; the next write fails and ends the connection.
    private var peerGone = false
    /// SO_RCVTIMEO could not be set: every read goes through poll.
    private var noBlockingReads = false
    private var lastRead: Int64 = 0
    /// When the current unfinished line began (nil when there is none, or while brokerd is not reading).
    var partialLineSince: Int64?
    private let readChunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    static let highWater = 256 * 1024
    static let lowWater = 64 * 1024
    static let lingerTime: Int64 = 1000

    /// `peer`: nil when the kernel would not say who connected (the connection is then refused).
    init?(fd: Int32, peer: AcceptedPeer?, state: ServerState, router: RequestRouter, table: ConnectionTable,
          logger: Logger) {
        guard let wakeup = Wakeup() else { return nil }
        self.fd = fd
        self.credentialsKnown = peer != nil
        accepted = peer
        self.peer = peer?.identity ?? PeerIdentity(pid: 0, uid: UInt32.max, gid: UInt32.max, executable: nil)
        caller = .unidentified(uid: self.peer.uid, pid: self.peer.pid, executable: self.peer.executable, reason: "not yet identified")
        let inbox = ConnectionInbox(wakeup: wakeup, state: state)
        self.inbox = inbox
        self.link = ConnectionLink { message, droppable in inbox.post(notification: message, droppable: droppable) }
        self.state = state
        self.router = router
        self.table = table
        self.logger = logger
    }

    deinit { readChunk.deallocate() }

    // MARK: What other threads may ask

    /// When the connection was admitted or last had a request: the smaller, the longer it has been idle. Bytes of an
    /// unfinished line do not count (nor would they keep it open: `lineTimeout`).
    var lastActivity: UInt64 { activity.load(ordering: .relaxed) }

    var answeredFromMemory: Int { rememberedAnswers.load(ordering: .relaxed) }

    func countRememberedAnswer() { rememberedAnswers.add(1, ordering: .relaxed) }

    /// Whether closing this connection would lose nothing but an idle socket: nothing running, waiting or subscribed.
    var mayBeEvicted: Bool { commitments.load(ordering: .acquiring) == 0 && !link.hasSubscriptions }

    /// Claims this connection for eviction if it is still idle, with no request unread in its socket either; it then
    /// sends the reason and closes. Called under the table's lock, so the connection (which leaves the table before
    /// closing its socket) still has it.
    func claimForEviction(reason: String) -> Bool {
        var byte: UInt8 = 0
        guard !link.hasSubscriptions, recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) < 0,
              commitments.compareExchange(expected: 0, desired: -1, ordering: .acquiringAndReleasing).exchanged
        else { return false }
        inbox.post(eviction: reason)
        return true
    }

    // MARK: Lifecycle

    /// What `admit` decided on the accepting thread.
    enum Verdict {
        case admitted
        case refused(RPCError)
        /// At a cap with every connection under it busy: the connection's own thread tries again for a while.
        case waitForRoom
    }

    /// Admits or refuses the connection; on the accepting thread, so that connections are admitted (and the
    /// longest-idle ones evicted) in the order they came.
    func admit() -> Verdict {
        if state.isDraining { return .refused(RPCError(code: RPCErrorCode.shuttingDown, message: "brokerd is shutting down")) }
        guard credentialsKnown else {
            logger.warning("connection refused: peer credentials unavailable")
            return .refused(RPCError(code: RPCErrorCode.permissionDenied, message: "permission denied: peer credentials unavailable"))
        }
        guard state.isAllowed(peer) else {
            logger.warning("connection refused: peer runs as another user", metadata: [
                "client_pid": "\(peer.pid)", "client_uid": "\(peer.uid)", "client_exe": "\(peer.executable ?? "?")",
            ])
            return .refused(RPCError(code: RPCErrorCode.permissionDenied, message:
                "permission denied: brokerd serves uid \(state.ownUID) only; this connection is from uid \(peer.uid)"))
        }
        limits = state.settings.withLock { $0 }
        markActivity()
        guard case .admitted = table.admit(self, settings: limits) else { return .waitForRoom }
        return register()
    }

    private func register() -> Verdict {
        registered = true
        guard state.register(self) else {
            return .refused(RPCError(code: RPCErrorCode.shuttingDown, message: "brokerd is shutting down"))
        }
        return .admitted
    }

    /// At a cap with every connection busy, a newcomer waits up to `admissionPatience` on its own thread for one of
    /// them to finish (a burst of connections outrunning their answers) before it is refused. Not on the accepting
    /// thread: a process that keeps its connections busy must not hold up everyone else's.
    private func waitForRoom() -> RPCError? {
        let deadline = Threads.nowMilliseconds() + Self.admissionPatience
        while true {
            switch table.admit(self, settings: limits) {
            case .admitted:
                if case .refused(let error) = register() { return error }
                return nil
            case .refused(let reason):
                guard Threads.nowMilliseconds() < deadline, !state.isDraining else {
                    logger.warning("connection refused: \(reason)", metadata: [
                        "client_pid": "\(peer.pid)", "client_exe": "\(peer.executable ?? "?")",
                    ])
                    return RPCError(code: RPCErrorCode.tooManyConnections, message: reason)
                }
                usleep(2_000)
            }
        }
    }

    static let admissionPatience: Int64 = 500

    /// The connection's thread, from `admit`'s verdict: serving, then the refusal or close.
    func run(_ verdict: Verdict) {
        lastRead = Threads.nowMilliseconds()
        switch verdict {
        case .admitted: break
        case .refused(let error): phase = .refusing(error)
        case .waitForRoom: if let error = waitForRoom() { phase = .refusing(error) }
        }
        if case .serving = phase {
            if let accepted { caller = accepted.identify() }
            logger.debug("caller identified", metadata: [
                "client_pid": "\(peer.pid)", "app": "\(caller.app)", "pinned_by": "\(caller.pinnedBy ?? "-")",
                "unit": "\(caller.unit ?? "-")", "notes": "\(caller.notes.joined(separator: "; "))",
            ])
            serve()
        }
        if case .refusing(let error) = phase { refuseAndLinger(error) }
        finish()
    }

    /// When no thread can be had for an admitted connection.
    func abandon() {
        finish()
    }

    private func serve() {
        var wait = timeval(tv_sec: 0, tv_usec: Int(Self.nextHitWait * 1000))
        if setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size)) != 0 {
            awaitsNextHit = false  // without the bound, a blocking read could outwait a stop: poll only
            noBlockingReads = true
        }
        while case .serving = phase {
            handleLines()
            // Lines left while the connection takes no work (slots full, answers unread) keep it busy too.
            if holdsInput, !hasCompleteLine {
                holdsInput = false
                release()
            }
            guard case .serving = phase else { return }
            // The client has sent its last request and has its answers, or is gone: nothing more can happen here.
            if peerGone || (inputClosed && inFlight == 0 && waiting.isEmpty && output.isEmpty) { return }
            if mayReadNextHit { readNextHit() } else { waitForEvents() }
        }
    }

    /// A lingering connection holds no slot: it counts against no cap and in no status.
    private func unregister() {
        guard registered else { return }
        registered = false
        table.remove(self)
        state.release(self)
    }

    private func finish() {
        memory.log.handOver(into: router.requestLog)
        handOverAudit()
        unregister()
        close(fd)
        link.close()
        inbox.close { dropWaiting() }
    }

    /// A closed connection's waiting batch members never run; a batch ends (for the shutdown count) once all of
    /// its members have either run or been dropped.
    private func dropWaiting() {
        while let (_, batch) = waiting.popFirst() {
            ConnectionInbox.countOut(.init(answer: nil, batch: batch), state: state)
        }
    }

    // MARK: Waiting and reading

    /// Whether another line may be handled now: a slot is free and the client takes its answers.
    var mayTakeWork: Bool { writable && inFlight < limits.maxInFlightPerConnection && waiting.isEmpty }

    private func waitForEvents() {
        let reading = mayTakeWork && !inputClosed
        var events: Int16 = 0
        if reading { events |= Int16(POLLIN) }
        if outputSent < output.count { events |= Int16(POLLOUT) }
        let timeout = pollTimeout(reading: reading)
        let (ready, socketEvents, woken) = withUnsafeTemporaryAllocation(of: pollfd.self, capacity: 2) { fds in
            fds[0] = pollfd(fd: peerGone ? -1 : fd, events: events, revents: 0)
            fds[1] = pollfd(fd: inbox.wakeup.readEnd, events: Int16(POLLIN), revents: 0)
            let ready = poll(fds.baseAddress, 2, timeout)
            return (ready, fds[0].revents, fds[1].revents != 0)
        }
        if ready < 0 {
            if errno != EINTR { phase = .closing }
            return
        }
        if ready == 0 { return checkTimeouts(reading: reading) }
        if woken { takeMail() }
        guard case .serving = phase else { return }
        if socketEvents & Int16(POLLOUT) != 0 { flushOutput() }
        if reading, socketEvents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
            // Busy from the read until its lines are handled: an eviction must not take a request just read.
            if !holdsInput {
                guard commit(1) else { return }
                holdsInput = true
            }
            readInput()
        } else if socketEvents & Int16(POLLHUP | POLLERR) != 0 {
            peerGone = true  // not reading: poll would report it again at once, for ever
        }
    }

    /// How long the connection of an app that asks for a cached token waits for its next request in a blocking
    /// read, in milliseconds, before it goes back to poll.
    static let nextHitWait = 20

    /// Whether to wait for the next request in a blocking read: right after a cache hit answered on this thread,
    /// with nothing running, queued, unfinished or subscribed, so that nothing but the client has anything for this
    /// thread, except a stop or a notification (a sign-in elsewhere), which then waits at most `nextHitWait`.
    private var mayReadNextHit: Bool {
        awaitsNextHit && !noBlockingReads && !inputClosed && pending.isEmpty && outputSent == output.count && mayTakeWork
            && inFlight == 0 && !link.hasSubscriptions
    }

    /// An app that asks for a cached token in a loop sends its next request within microseconds: one blocking read
    /// (bounded by SO_RCVTIMEO) takes it with one system call, where poll and a read take two, each a few percent of
    /// a hit. Busy for the whole wait, like a read after poll: an eviction cannot take a request this read has taken.
    private func readNextHit() {
        guard commit(1) else {
            awaitsNextHit = false  // claimed for eviction: poll reads the mail that says so
            return
        }
        holdsInput = true
        readInput(blocking: true)
    }

    private func readInput(blocking: Bool = false) {
        let count = recv(fd, readChunk.baseAddress, readChunk.count, blocking ? 0 : Int32(MSG_DONTWAIT))
        if count > 0 {
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: readChunk[..<count]))
            lastRead = Threads.nowMilliseconds()
        } else if count == 0 {
            // No more bytes will come: an unfinished line stays unfinished, and is no reason to close.
            inputClosed = true
            partialLineSince = nil
        } else if errno == EAGAIN || errno == EWOULDBLOCK {
            awaitsNextHit = false  // the blocking read's time is up (or poll was wrong): poll from now on
        } else if errno != EINTR {
            logger.debug("connection error", metadata: ["errno": "\(errno)"])
            phase = .closing
        }
    }

    func markActivity() {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        activity.store(UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec), ordering: .relaxed)
    }

    /// Until the idle timeout, the end of the unfinished line's time while reading, or the end of the log window
    /// whose repeats this connection holds.
    private func pollTimeout(reading: Bool) -> Int32 {
        var deadline = lastRead + Self.milliseconds(limits.idleTimeout)
        if reading, let since = partialLineSince { deadline = min(deadline, since + Self.milliseconds(limits.lineTimeout)) }
        var remaining = deadline - Threads.nowMilliseconds() + 5  // the coarse clock lags by a tick at most
        if let due = memory.log.handOverDue(window: router.requestLog.windowNanoseconds) {
            remaining = min(remaining, Int64(bitPattern: due &- Threads.nowNanoseconds()) / 1_000_000 + 1)
        }
        if let due = memory.audit.due { remaining = min(remaining, (due - router.broker.now()) * 1000 + 1) }
        return Int32(clamping: max(0, remaining))
    }

    /// Hands the cache hits counted for the audit over to it.
    func handOverAudit() {
        let tallies = memory.audit.take()
        if !tallies.isEmpty { router.apps.record(tallies, caller: caller, frontEnd: "socket") }
    }

    /// Counts a remembered answer's hit for the audit: an increment while the same request repeats; another request
    /// (or the end of the window) hands the tally over.
    func auditHit(_ answer: RememberedAnswer) {
        let now = router.broker.now()
        if memory.audit.countRepeat(number: answer.subjectNumber, at: now) { return }
        guard let subject = memory.answers.lastSubject else { return }
        let finished = memory.audit.add(subject, number: answer.subjectNumber, at: now)
        if !finished.isEmpty { router.apps.record(finished, caller: caller, frontEnd: "socket") }
    }

    private func checkTimeouts(reading: Bool) {
        if let due = memory.audit.due, router.broker.now() >= due { handOverAudit() }
        if let due = memory.log.handOverDue(window: router.requestLog.windowNanoseconds), Threads.nowNanoseconds() >= due {
            memory.log.handOver(into: router.requestLog)
        }
        let now = Threads.nowMilliseconds()
        if reading, let since = partialLineSince, now >= since + Self.milliseconds(limits.lineTimeout) {
            let seconds = limits.lineTimeout.components.seconds
            logger.warning("closing connection: a request line was not finished in time", metadata: [
                "client_pid": "\(peer.pid)", "line_timeout_s": "\(seconds)",
            ])
            phase = .refusing(RPCError(code: RPCErrorCode.invalidRequest, message:
                "invalid request: incomplete line (no newline within \(seconds) s of its start); the connection is closed"))
            return
        }
        guard now >= lastRead + Self.milliseconds(limits.idleTimeout) else { return }
        if inFlight == 0, waiting.isEmpty, !link.hasSubscriptions {
            logger.debug("closing idle connection", metadata: ["client_pid": "\(peer.pid)"])
            phase = .closing
        } else {
            lastRead = now  // busy: look again after another idle period
        }
    }

    static func milliseconds(_ amount: Duration) -> Int64 {
        amount.components.seconds * 1000 + amount.components.attoseconds / 1_000_000_000_000_000
    }


    // MARK: Mail from other threads

    private func takeMail() {
        inbox.wakeup.drain()
        let mail = inbox.take()
        for finished in mail.finished { self.finished(finished) }
        if case .serving = phase {
            for (message, droppable) in mail.notifications where writable || !droppable { send(message) }
        }
        if mail.closeNow { phase = .closing }
        if let reason = mail.eviction, case .serving = phase {
            logger.info("closing the longest-idle connection", metadata: ["client_pid": "\(peer.pid)", "reason": "\(reason)"])
            phase = .refusing(RPCError(code: RPCErrorCode.tooManyConnections,
                                       message: "too many connections: this idle connection was closed to make \(reason)"))
        }
    }

    /// Raises `commitments` by `count` unless the connection has been claimed for eviction.
    func commit(_ count: Int) -> Bool {
        let held = inFlight + waiting.count + (holdsInput ? 1 : 0)
        return commitments.compareExchange(expected: held, desired: held + count, ordering: .acquiringAndReleasing).exchanged
    }

    func release(_ count: Int = 1) { commitments.subtract(count, ordering: .releasing) }

    // MARK: Output

    /// Writes `message` and a newline.
    func send(_ message: [UInt8]) {
        var line = message
        line.append(UInt8(ascii: "\n"))
        sendLine(line)
    }

    /// Writes a whole line (with its newline) now, as far as the socket takes it; the rest waits for POLLOUT.
    func sendLine(_ line: [UInt8]) {
        guard outputSent == output.count else {
            output.append(contentsOf: line)
            updateWritable()
            return
        }
        let sent = line.withUnsafeBytes { sendSome($0) }
        guard sent < line.count, case .serving = phase else { return }
        output.removeAll(keepingCapacity: true)
        outputSent = 0
        output.append(contentsOf: line[sent...])
        updateWritable()
    }

    /// Writes a whole line given as pieces (with its newline) in one gathering write when nothing is queued before
    /// it; what the socket does not take waits for POLLOUT.
    func sendLine(pieces: UnsafeBufferPointer<UnsafeRawBufferPointer>) {
        let queued = outputSent < output.count
        let sent = queued ? 0 : sendGathered(pieces)
        let total = pieces.reduce(0) { $0 + $1.count }
        guard sent < total, case .serving = phase else { return }
        if !queued {
            output.removeAll(keepingCapacity: true)
            outputSent = 0
        }
        var skip = sent
        for piece in pieces {
            if skip >= piece.count {
                skip -= piece.count
                continue
            }
            output.append(contentsOf: UnsafeRawBufferPointer(rebasing: piece[skip...]))
            skip = 0
        }
        updateWritable()
    }

    private func sendGathered(_ pieces: UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Int {
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: pieces.count) { vectors in
            for (index, piece) in pieces.enumerated() {
                vectors[index] = iovec(iov_base: UnsafeMutableRawPointer(mutating: piece.baseAddress), iov_len: piece.count)
            }
            var message = msghdr()
            message.msg_iov = vectors.baseAddress
            message.msg_iovlen = pieces.count
            while true {
                let count = sendmsg(fd, &message, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                if count >= 0 { return count }
                if errno == EINTR { continue }
                // EPIPE, ECONNRESET: the client is gone, and with it everything still to be written.
                if errno != EAGAIN, errno != EWOULDBLOCK, case .serving = phase { phase = .closing }
                return 0
            }
        }
    }

    private func flushOutput() {
        let sent = output.withUnsafeBytes { sendSome(UnsafeRawBufferPointer(rebasing: $0[outputSent...])) }
        outputSent += sent
        if outputSent == output.count {
            output.removeAll(keepingCapacity: output.capacity <= Self.lowWater)
            outputSent = 0
        }
        updateWritable()
    }

    private func sendSome(_ bytes: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        while offset < bytes.count {
            let count = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            if count > 0 {
                offset += count
            } else if count < 0, errno == EINTR {
                continue
            } else if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                break
            } else {
                // EPIPE, ECONNRESET: the client is gone, and with it everything still to be written.
                if case .serving = phase { phase = .closing }
                break
            }
        }
        return offset
    }

    private func updateWritable() {
        let queued = output.count - outputSent
        if writable, queued > Self.highWater { writable = false }
        if !writable, queued <= Self.lowWater { writable = true }
    }

    // MARK: Refusing

    /// Sends the error and closes, lingering: once the error is out, brokerd stops sending (a half-close, so the client
    /// reads the error and then end-of-file) and drops what the client still sends until it closes, for at most
    /// `lingerTime`. Closing a Unix socket while the client's request is unread makes the client's write or read fail
    /// (EPIPE, ECONNRESET), often before it has read the error it was sent. A client that neither reads the error
    /// nor closes is closed on anyway.
    private func refuseAndLinger(_ error: RPCError) {
        unregister()
        let deadline = Threads.nowMilliseconds() + Self.lingerTime
        var line = output.count > outputSent ? Array(output[outputSent...]) : []
        line += RPCEnvelope.failure(id: "null", error: error)
        line.append(UInt8(ascii: "\n"))
        var sent = 0
        while sent < line.count {
            guard waitUntil(deadline, for: Int16(POLLOUT)) else { return }
            let count = line.withUnsafeBytes { bytes in
                Glibc.send(fd, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if count > 0 { sent += count } else if count < 0, errno == EAGAIN || errno == EINTR { continue } else { return }
        }
        shutdown(fd, Int32(SHUT_WR))
        while waitUntil(deadline, for: Int16(POLLIN)) {
            let count = recv(fd, readChunk.baseAddress, readChunk.count, Int32(MSG_DONTWAIT))
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return }
        }
    }

    /// Waits for `events` on the socket until `deadline`; false when the time is up or the socket failed.
    private func waitUntil(_ deadline: Int64, for events: Int16) -> Bool {
        let remaining = deadline - Threads.nowMilliseconds()
        guard remaining > 0 else { return false }
        var descriptor = pollfd(fd: fd, events: events, revents: 0)
        let ready = poll(&descriptor, 1, Int32(clamping: remaining))
        return ready > 0 || (ready < 0 && errno == EINTR)
    }
}
