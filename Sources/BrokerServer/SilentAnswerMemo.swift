import BrokerCore
import BrokerProtocol

/// The answers of one connection's recent cache hits, as wire bytes, by request. Most silent requests repeat one the
/// app made before (it asks again for the token it already has); such a request is answered by copying bytes,
/// without resolving the account, looking the token up, building the account or encoding a result. The broker says
/// when an answer stops being the answer (`Broker.isStillFresh`: any change to the cache or the settings, the
/// token's buffer or `refresh_on`), and then every remembered answer goes at once.
///
/// Keyed by the request line as sent, less its id and correlation id (`RequestLineShape`): a repeated request is
/// recognised before it is parsed, and its id and correlation id go into the answer as it leaves. One per
/// connection, touched only on its thread: a hit takes no lock that another connection's hits take.
struct SilentAnswerMemo {
    struct Answer {
        var text: TokenResultText
        var freshness: HitFreshness
    }

    /// Distinct requests remembered at most; past that, the memo starts again. An app asks for a few tokens.
    static let capacity = 64

    private var answers: [RequestLineShape.Key: Answer] = [:]

    /// The answer to a request the memo holds, while its answer is still the answer; nil otherwise (and when the
    /// answer went stale, nothing is kept). The line's own id and correlation id go into it as it is written.
    mutating func answer(to shape: RequestLineShape, broker: Broker) -> RememberedAnswer? {
        guard let id = shape.id, let correlationId = shape.correlationId,
              let index = answers.index(forKey: shape.key) else { return nil }
        guard broker.isStillFresh(&answers.values[index].freshness) else {
            answers = [:]  // what made this one stale made the rest stale too, or will soon
            return nil
        }
        return RememberedAnswer(text: answers.values[index].text, id: id, correlationId: correlationId)
    }

    mutating func remember(_ answer: Answer, for key: RequestLineShape.Key) {
        if answers.count >= Self.capacity { answers = [:] }
        answers[key] = answer
    }
}

/// A remembered token result with the id and correlation id of the request it now answers.
struct RememberedAnswer {
    var text: TokenResultText
    var id: String
    var correlationId: String?
}

/// What one connection keeps between its requests, on its own thread: its remembered answers and its count of
/// repeated requests for the log.
struct ConnectionMemory {
    var answers = SilentAnswerMemo()
    var log = RequestLog.Local()
}
