import BrokerCore
import BrokerJSON
import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The answers of recent cache hits, as wire bytes, by request. Most silent requests repeat one an app made before
/// (it asks again for the token it already has); such a request is answered by copying bytes, without resolving
/// the account, looking the token up, building the account or encoding a result. The broker says when an answer
/// stops being the answer (`Broker.isStillFresh`: any change to the cache or the settings, the token's buffer or
/// `refresh_on`), and then every remembered answer goes at once.
///
/// Keyed by the params as sent, less `correlationId`, which goes into each answer as it leaves. Why a lock: it is
/// read on the event loops, and held only to look up and copy.
final class SilentAnswerMemo: @unchecked Sendable {
    struct Answer {
        var text: TokenResultText
        var freshness: HitFreshness
    }

    /// Distinct requests remembered at most; past that, the memo starts again.
    static let capacity = 1_024

    private var answers: [JSONValue: Answer] = [:]
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// A request's key and its correlation id; nil when the params are not an object or the correlation id is not
    /// a string (the full path says what is wrong).
    static func key(of params: JSONValue?) -> (key: JSONValue, correlationId: String?)? {
        guard case .object(var object)? = params else { return nil }
        let correlationId: String?
        switch object["correlationId"] {
        case nil, .null?: correlationId = nil
        case .string(let text)?: correlationId = text
        default: return nil
        }
        object["correlationId"] = nil
        return (.object(object), correlationId)
    }

    /// The remembered result for this key while it is still the answer; nil otherwise (and then nothing is kept).
    func resultJSON(for key: JSONValue, correlationId: String?, broker: Broker) -> [UInt8]? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard let index = answers.index(forKey: key) else { return nil }
        guard broker.isStillFresh(&answers.values[index].freshness) else {
            answers = [:]  // what made this one stale made the rest stale too, or will soon
            return nil
        }
        return answers.values[index].text.json(correlationId: correlationId)
    }

    func remember(_ answer: Answer, for key: JSONValue) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if answers.count >= Self.capacity { answers = [:] }
        answers[key] = answer
    }

    var count: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return answers.count
    }
}
