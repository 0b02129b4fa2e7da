import BrokerPlatform

/// What other threads hand a connection's thread: answers of finished requests, notifications, an eviction or a
/// close. Posting wakes the thread's poll. Once the connection is done, a finished request is counted out here
/// instead (`ServerState.end`), so a graceful stop never waits for an answer that has nowhere to go.
///
/// Kept apart from `ClientConnection` so that the connection's `ConnectionLink` can post here without holding the
/// connection (which holds the link).
final class ConnectionInbox: Sendable {
    struct Finished {
        var answer: [UInt8]?
        var batch: BatchAnswers?
    }

    struct Mail {
        var finished: [Finished] = []
        var notifications: [(message: [UInt8], droppable: Bool)] = []
        var eviction: String?
        var closeNow = false
        fileprivate var closed = false
    }

    let wakeup: Wakeup
    private let state: ServerState
    private let mail = Locked(Mail())

    init(wakeup: Wakeup, state: ServerState) {
        self.wakeup = wakeup
        self.state = state
    }

    func post(_ finished: Finished) {
        let delivered = mail.withLock { mail -> Bool in
            guard !mail.closed else {
                Self.countOut(finished, state: state)
                return false
            }
            mail.finished.append(finished)
            return true
        }
        if delivered { wakeup.signal() }
    }

    func post(notification message: [UInt8], droppable: Bool) {
        let delivered = mail.withLock { mail -> Bool in
            guard !mail.closed else { return false }
            mail.notifications.append((message, droppable))
            return true
        }
        if delivered { wakeup.signal() }
    }

    func post(eviction reason: String) {
        mail.withLock { $0.eviction = $0.eviction ?? reason }
        wakeup.signal()
    }

    func postClose() {
        mail.withLock { $0.closeNow = true }
        wakeup.signal()
    }

    /// Everything posted since the last call (call after `wakeup.drain()`, so that nothing posted later goes unseen).
    func take() -> Mail {
        mail.withLock { mail in
            defer {
                mail.finished.removeAll()
                mail.notifications.removeAll()
                mail.eviction = nil
                mail.closeNow = false
            }
            return mail
        }
    }

    /// Ends the inbox: what is in it and what comes later is counted out, never written. `leftOver` runs under the
    /// same lock, so batch members the connection never started are counted out in step with those finishing now.
    func close(leftOver: () -> Void) {
        mail.withLock { mail in
            mail.closed = true
            for finished in mail.finished { Self.countOut(finished, state: state) }
            mail.finished.removeAll()
            mail.notifications.removeAll()
            leftOver()
        }
    }

    /// A request (or batch member) whose answer will not be written: it stops counting as in flight; a batch ends
    /// once all of its members have.
    static func countOut(_ finished: Finished, state: ServerState) {
        guard let batch = finished.batch else { return state.end() }
        batch.unfinished -= 1
        if batch.unfinished == 0 { state.end() }
    }
}

/// A batch's answers, collected as its members finish and written as one array once the last one is done.
/// Touched only on its connection's thread, or under its connection's inbox lock once the connection is done.
final class BatchAnswers: @unchecked Sendable {
    var answers: [[UInt8]]
    var unfinished: Int

    init(answers: [[UInt8]], unfinished: Int) {
        self.answers = answers
        self.unfinished = unfinished
    }
}
