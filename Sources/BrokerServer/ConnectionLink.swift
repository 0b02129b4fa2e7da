import BrokerPlatform

/// What a request may do with its connection besides answering: send notifications (interactive prompts,
/// subscribed events) and keep event forwarding running until the connection closes.
final class ConnectionLink: Sendable {
    private let sender: @Sendable (_ message: [UInt8], _ droppable: Bool) -> Void
    private let subscriptions = Locked<(tasks: [Task<Void, Never>], closed: Bool)>(([], false))
    private let closeActions = Locked<(actions: [@Sendable () -> Void], closed: Bool)>(([], false))

    /// `send` writes a message; one marked droppable is dropped while the client is not taking its output.
    init(send: @escaping @Sendable (_ message: [UInt8], _ droppable: Bool) -> Void) {
        sender = send
    }

    /// For requests that have no connection (tests, internal callers).
    static let detached = ConnectionLink(send: { _, _ in })

    /// A notification the request needs to go on (an interactive prompt): always sent.
    func send(_ message: [UInt8]) { sender(message, false) }

    /// A subscribed event: dropped while the client leaves its answers unread, since events can come without end
    /// and would otherwise pile up in brokerd's write buffer.
    func sendEvent(_ message: [UInt8]) { sender(message, true) }

    /// Keeps `task` running until the connection closes; false (and the task canceled) if it already has.
    @discardableResult
    func attach(_ task: Task<Void, Never>) -> Bool {
        let attached = subscriptions.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.tasks.append(task)
            return true
        }
        if !attached { task.cancel() }
        return attached
    }

    /// Runs `action` when the connection closes (at once if it already has): an interactive sign-in whose app went
    /// away is canceled then, instead of holding its client's sign-in slot until the timeout.
    /// (Kept until the connection closes: one small closure per sign-in started on it.)
    func whenClosed(_ action: @escaping @Sendable () -> Void) {
        let runNow = closeActions.withLock { state -> Bool in
            guard !state.closed else { return true }
            state.actions.append(action)
            return false
        }
        if runNow { action() }
    }

    /// Subscribed connections are not closed for being idle.
    var hasSubscriptions: Bool { subscriptions.withLock { !$0.tasks.isEmpty } }

    func close() {
        let tasks = subscriptions.withLock { state -> [Task<Void, Never>] in
            state.closed = true
            defer { state.tasks.removeAll() }
            return state.tasks
        }
        for task in tasks { task.cancel() }
        let actions = closeActions.withLock { state -> [@Sendable () -> Void] in
            state.closed = true
            defer { state.actions.removeAll() }
            return state.actions
        }
        for action in actions { action() }
    }
}
