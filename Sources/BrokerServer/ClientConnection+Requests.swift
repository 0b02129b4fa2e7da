import BrokerProtocol
import BrokerWire
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Lines in, answers out: what a connection does with each request it reads.
extension ClientConnection {
    /// Handles the complete lines received so far while the connection may take work; the rest stays in `pending`
    /// until answers have gone out. Then watches an unfinished line.
    func handleLines() {
        var consumed = 0
        var completedLine = false
        while case .serving = phase, mayTakeWork, let newline = nextNewline(from: consumed) {
            if newline - consumed > limits.maxMessageBytes { return tooLarge() }
            var end = newline
            if end > consumed, pending[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let start = consumed
            consumed = newline + 1
            completedLine = true
            if !answerRepeat(start..<end) { handleLine(Array(pending[start..<end])) }
        }
        if consumed > 0 {
            pending.removeFirst(consumed)
            markActivity()
        }
        guard case .serving = phase else { return }
        // Only an unfinished line is left, unless brokerd stopped taking work.
        if mayTakeWork, pending.count > limits.maxMessageBytes { return tooLarge() }
        if pending.isEmpty || !mayTakeWork {
            partialLineSince = nil
        } else if partialLineSince == nil || completedLine {
            partialLineSince = Threads.nowMilliseconds()
        }
    }

    var hasCompleteLine: Bool { nextNewline(from: 0) != nil }

    private func nextNewline(from start: Int) -> Int? {
        guard start < pending.count else { return nil }
        return pending.withUnsafeBytes { bytes -> Int? in
            guard let found = memchr(bytes.baseAddress! + start, Int32(UInt8(ascii: "\n")), bytes.count - start) else { return nil }
            return bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }

    private func tooLarge() {
        logger.warning("closing connection: message over the size limit", metadata: [
            "client_pid": "\(peer.pid)", "limit_bytes": "\(limits.maxMessageBytes)",
        ])
        phase = .refusing(RPCError(code: RPCErrorCode.messageTooLarge,
                                   message: "message larger than \(limits.maxMessageBytes) bytes; the connection is closed"))
    }

    /// Answers the line in `pending[range]` if it is the request answered last, asked again (the usual case of an
    /// app that asks for its token in a loop), without copying or parsing it. Like every remembered answer, not
    /// counted in flight: it is over before this thread looks at its mail again, which is where a stop closes it.
    private func answerRepeat(_ range: Range<Int>) -> Bool {
        guard !state.isDraining else { return false }
        let answer = pending.withUnsafeBytes { bytes in
            router.repeatedAnswer(UnsafeRawBufferPointer(rebasing: bytes[range]), from: peer, memory: &memory)
        }
        guard let answer else { return false }
        countRememberedAnswer()  // before the answer: a client that asks for the count next sees its own
        send(answer)
        auditHit(answer)
        return true
    }

    private func handleLine(_ line: [UInt8]) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }
        // A request asked before, whose answer still holds, is answered before it is even parsed.
        // Scanned once: the memo looks its answer up by it, and a hit made below is remembered by it. Not scanned
        // while the memo serves none of this connection's requests.
        let shape = memory.answers.consultsNextLine() ? memory.answers.shape(of: line) : nil
        if !state.isDraining, let answer = router.rememberedAnswer(line, shape: shape, from: peer, memory: &memory) {
            countRememberedAnswer()
            send(answer)
            auditHit(answer)
            return
        }
        // The usual silent request is read in one pass; a cache hit is answered here, on the connection's thread.
        // Anything else, a miss included, is parsed the usual way below and goes to a task.
        var triedHit = false
        if let silent = SilentRequestLine(line), state.begin() {
            triedHit = true
            // Bound once, not kept beside its binding: a copy of the answer retained and released its strings again.
            if let answer = router.cachedAnswer(id: silent.id, params: silent.params, line: line, shape: shape,
                                                from: peer, caller: caller, memory: &memory) {
                state.countServed()  // before the answer, as a remembered one
                send(answer)
                state.end(served: false)
                return
            }
            state.end(served: false)
        }
        switch RPCEnvelope.parse(line) {
        case .unusable(let error):
            send(RPCEnvelope.failure(id: "null", error: error))
        case .single(.failure(let failure)):
            send(RPCEnvelope.failure(id: failure.id, error: failure.error))
        case .single(.success(let request)):
            if !triedHit, state.begin() {
                if let answer = router.cachedAnswer(request, line: line, shape: shape, from: peer, caller: caller,
                                                    memory: &memory) {
                    state.countServed()
                    send(answer)
                    state.end(served: false)
                    return
                }
                state.end(served: false)
            }
            runSingle(request)
        case .batch(let items):
            runBatch(items)
        }
    }

    private func send(_ answer: RememberedAnswer) {
        answer.text.withAnswerLinePieces(id: answer.id, correlationId: answer.correlationId) { sendLine(pieces: $0) }
        awaitsNextHit = true
    }

    // MARK: Running requests

    private static let shuttingDown = RPCError(code: RPCErrorCode.shuttingDown, message: "brokerd is shutting down")

    private func runSingle(_ request: RPCRequest) {
        awaitsNextHit = false
        guard commit(1) else { return }  // claimed for eviction: the eviction's error answers instead
        // Counted until the answer is written, so a graceful stop never closes a connection under an answer.
        guard state.begin() else {
            release()
            if let id = request.id { send(RPCEnvelope.failure(id: id, error: Self.shuttingDown)) }
            return
        }
        launch(request, batch: nil)
    }

    /// Refuses a batch over `maxBatchSize` whole; otherwise runs its members as slots are free (each member holds one).
    private func runBatch(_ items: [Result<RPCRequest, RPCFailure>]) {
        awaitsNextHit = false
        guard items.count <= limits.maxBatchSize else {
            logger.warning("batch refused: too many members", metadata: [
                "client_pid": "\(peer.pid)", "members": "\(items.count)", "limit": "\(limits.maxBatchSize)",
            ])
            let error = RPCError(code: RPCErrorCode.invalidRequest, message:
                "invalid request: a batch may have at most \(limits.maxBatchSize) members; this one has \(items.count)")
            return send(RPCEnvelope.failure(id: "null", error: error))
        }
        var requests: [RPCRequest] = [], failures: [[UInt8]] = []
        for item in items {
            switch item {
            case .success(let request): requests.append(request)
            case .failure(let failure): failures.append(RPCEnvelope.failure(id: failure.id, error: failure.error))
            }
        }
        if requests.isEmpty {
            if !failures.isEmpty { send(Self.joinBatch(failures)) }
            return
        }
        guard commit(requests.count) else { return }
        guard state.begin() else {
            release(requests.count)
            let answers = failures + requests.compactMap { $0.id.map { RPCEnvelope.failure(id: $0, error: Self.shuttingDown) } }
            if !answers.isEmpty { send(Self.joinBatch(answers)) }
            return
        }
        let batch = BatchAnswers(answers: failures, unfinished: requests.count)
        for request in requests {
            if inFlight < limits.maxInFlightPerConnection, waiting.isEmpty {
                launch(request, batch: batch)
            } else {
                waiting.append((request, batch))
            }
        }
    }

    /// Runs one request (or batch member) as a task, holding a slot until its answer is written.
    private func launch(_ request: RPCRequest, batch: BatchAnswers?) {
        inFlight += 1
        let router = self.router, peer = self.peer, caller = self.caller, link = self.link, inbox = self.inbox
        Task {
            let answer = await router.answer(request, from: peer, caller: caller, link: link)
            inbox.post(.init(answer: answer, batch: batch))
        }
    }

    func finished(_ finished: ConnectionInbox.Finished) {
        inFlight -= 1
        release()
        markActivity()
        let serving: Bool
        if case .serving = phase { serving = true } else { serving = false }
        if let batch = finished.batch {
            if let answer = finished.answer { batch.answers.append(answer) }
            batch.unfinished -= 1
            if batch.unfinished == 0 {
                if !batch.answers.isEmpty, serving { send(Self.joinBatch(batch.answers)) }
                state.end()
            }
        } else {
            if let answer = finished.answer, serving { send(answer) }
            state.end()
        }
        guard case .serving = phase else { return }
        while inFlight < limits.maxInFlightPerConnection, let (request, batch) = waiting.popFirst() {
            launch(request, batch: batch)
        }
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
