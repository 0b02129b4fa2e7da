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

    /// The shape of `line`: from the pattern of the line answered last when it tells (another request of the same
    /// app, `RepeatedRequestPattern.shape(of:)`), else by the scan.
    func shape(of line: [UInt8]) -> RequestLineShape? {
        last?.pattern.shape(of: line) ?? RequestLineShape(line)
    }

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
/// is seldom answered from it, yet every line it sends was scanned for its shape, looked up and kept: a line scanned
/// and kept in vain costs about nine thousand instructions, a line served saves about thirty thousand (callgrind,
/// 10,000 accounts). So the memo is judged by its share: after a trial of `trialLines` answers kept, it stays
/// consulted when it served at least one line for every three it kept (a quarter of the lines it saw). Otherwise
/// only one line in `probeInterval` is looked up and kept. A probe served (or a repeat of the answer kept last)
/// starts a shorter trial (`probeTrialLines`: the memo holds answers by then); each that fails again makes the probes
/// twice as rare, up to `longestProbeInterval`, so that random requests over thousands of tokens, which the memo
/// answers by chance now and then, stop paying for trials.
struct MemoUsefulness {
    /// Answers kept in the first trial: two fillings of the memo, for an app that cycles through many requests.
    static let trialLines = 2 * SilentAnswerMemo.capacity
    /// Answers kept in a trial a probe started.
    static let probeTrialLines = SilentAnswerMemo.capacity / 2
    /// Lines kept per line served at most, for the memo to stay consulted.
    static let keptPerServed = 3
    static let firstProbeInterval = 16
    static let longestProbeInterval = 1024

    private var keptCount = 0
    private var servedCount = 0
    private var trialLength = trialLines
    private var probing = false
    private(set) var probeInterval = firstProbeInterval
    private var linesSinceProbe = 0

    mutating func kept() {
        guard !probing else { return }
        keptCount += 1
        guard keptCount >= trialLength else { return }
        if servedCount * Self.keptPerServed >= keptCount {
            probeInterval = Self.firstProbeInterval
        } else {
            probing = true
            linesSinceProbe = 0
        }
        (keptCount, servedCount) = (0, 0)
    }

    mutating func served() {
        guard probing else {
            servedCount += 1
            return
        }
        // The app may repeat itself again: a trial says. Should it fail, the next probes come half as often.
        probing = false
        probeInterval = min(2 * probeInterval, Self.longestProbeInterval)
        trialLength = Self.probeTrialLines
        (keptCount, servedCount) = (0, 0)
    }

    mutating func consultsNextLine() -> Bool {
        guard probing else { return true }
        linesSinceProbe += 1
        guard linesSinceProbe >= probeInterval else { return false }
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
