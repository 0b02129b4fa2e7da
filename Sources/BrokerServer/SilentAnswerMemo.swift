import BrokerCore
import BrokerProtocol
import BrokerWire

/// The answers of one connection's recent cache hits, as wire bytes, by request. Most silent requests repeat one the
/// app made before (it asks again for the token it already has); such a request is answered by copying bytes,
/// without resolving the account, looking the token up, building the account or encoding a result. The broker says
/// when an answer stops being the answer (`Broker.isStillFresh`: any change to the cache or the settings, the
/// token's buffer or `refresh_on`), and then every remembered answer goes at once.
///
/// Keyed by the request line as sent, less its id and correlation id (`RequestLineShape`): a repeated request is
/// recognised before it is parsed, and its id and correlation id go into the answer as it leaves. The request
/// answered last is also kept as a pattern (`RepeatedRequestPattern`): the same request asked again, the usual case,
/// is recognised by comparing bytes, without making a key. One per connection, touched only on its thread: a hit
/// takes no lock that another connection's hits take.
struct SilentAnswerMemo {
    /// A reference: an answer served is read out of the table and kept as the last one, where a value was copied
    /// (its text, subject and freshness retained field by field) and the one it replaced destroyed field by field,
    /// a tenth of the instructions of a line the memo answers.
    final class Answer {
        let text: TokenResultText
        var freshness: HitFreshness
        /// What the audit records of this answer, and a number that tells it from the connection's other answers.
        let subject: HitAudit.Subject
        let number: Int

        init(text: TokenResultText, freshness: HitFreshness, subject: HitAudit.Subject, number: Int) {
            self.text = text
            self.freshness = freshness
            self.subject = subject
            self.number = number
        }
    }

    /// Distinct requests remembered at most; past that, the memo starts again. An app asks for a few tokens.
    static let capacity = 64

    private var answers: [RequestLineShape.Key: Answer] = [:]
    private var last: (pattern: RepeatedRequestPattern, answer: Answer)?
    private var usefulness = MemoUsefulness()

    /// Whether the next line should be looked up here (and its answer kept): false while the memo serves nothing
    /// (`MemoUsefulness`), and then the line is not scanned for its shape either.
    mutating func consultsNextLine() -> Bool { usefulness.consultsNextLine() }

    /// The answer to `line` when it is the request answered last, asked again, and that answer still holds.
    mutating func answer(repeating line: UnsafeRawBufferPointer, broker: Broker) -> RememberedAnswer? {
        guard let last, let values = last.pattern.match(line) else { return nil }
        guard broker.isStillFresh(&last.answer.freshness) else {
            forget()
            return nil
        }
        usefulness.served()
        return RememberedAnswer(text: last.answer.text, id: values.id, correlationId: values.correlationId,
                                subjectNumber: last.answer.number)
    }

    /// The audit subject of the answer given last.
    var lastSubject: HitAudit.Subject? { last?.answer.subject }

    /// The answer to a request the memo holds, while its answer is still the answer; nil otherwise (and when the
    /// answer went stale, nothing is kept). The line's own id and correlation id go into it as it is written.
    mutating func answer(to shape: RequestLineShape, line: [UInt8], broker: Broker) -> RememberedAnswer? {
        guard let id = shape.id, let correlationId = shape.correlationId, let answer = answers[shape.key] else { return nil }
        guard broker.isStillFresh(&answer.freshness) else {
            forget()
            return nil
        }
        last = (RepeatedRequestPattern(line: line, shape: shape), answer)
        usefulness.served()
        return RememberedAnswer(text: answer.text, id: id, correlationId: correlationId, subjectNumber: answer.number)
    }

    /// `shape` must be that of `line`, a request that parsed with the id and correlation id the shape reads.
    mutating func remember(_ answer: Answer, for shape: RequestLineShape, line: [UInt8]) {
        if answers.count >= Self.capacity { answers = [:] }
        answers[shape.key] = answer
        usefulness.kept()
        last = (RepeatedRequestPattern(line: line, shape: shape), answer)
    }

    /// What made one answer stale made the rest stale too, or will soon.
    private mutating func forget() {
        answers = [:]
        last = nil
    }
}

/// Whether a connection's memo earns its keep. An app that asks for many different tokens (more than the memo holds)
/// is never answered from it, yet every line it sends was scanned for its shape, looked up and kept: 15 % of such a
/// hit's instructions (callgrind, 1,000 accounts). Once `giveUpAfter` answers in a row were kept and none served,
/// only one line in `probeEvery` is looked up and kept; the first one served (the app repeats itself again) makes
/// every line count again. Repeats are still answered from the answer kept last at no cost (`answer(repeating:)`).
struct MemoUsefulness {
    /// Two fillings of the memo with nothing served from either.
    static let giveUpAfter = 2 * SilentAnswerMemo.capacity
    /// A probe's cost spread over the lines it skips: about a sixteenth of a scan a line.
    static let probeEvery = 16

    private var keptInARow = 0
    private var linesSinceProbe = 0

    mutating func kept() { keptInARow += 1 }

    mutating func served() {
        keptInARow = 0
        linesSinceProbe = 0
    }

    mutating func consultsNextLine() -> Bool {
        guard keptInARow >= Self.giveUpAfter else { return true }
        linesSinceProbe += 1
        guard linesSinceProbe >= Self.probeEvery else { return false }
        linesSinceProbe = 0
        return true
    }
}

/// A remembered token result with the id and correlation id of the request it now answers.
struct RememberedAnswer {
    var text: TokenResultText
    var id: String
    var correlationId: String?
    var subjectNumber: Int
}

/// What one connection keeps between its requests, on its own thread: its remembered answers, its count of
/// repeated requests for the log and of cache hits for the audit, and what it learned of the app policy.
struct ConnectionMemory {
    var answers = SilentAnswerMemo()
    var log = RequestLog.Local()
    var audit = HitAudit()
    var access = AccessMemo()
    /// Numbers the remembered answers' audit subjects.
    var nextSubjectNumber = 1
}
