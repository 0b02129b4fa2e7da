import NIOConcurrencyHelpers

/// What a request may do with its connection besides answering: send notifications (interactive prompts,
/// subscribed events) and keep event forwarding running until the connection closes.
final class ConnectionLink: Sendable {
    private let sender: @Sendable ([UInt8]) -> Void
    private let subscriptions = NIOLockedValueBox<(tasks: [Task<Void, Never>], closed: Bool)>(([], false))
    private let closeActions = NIOLockedValueBox<(actions: [@Sendable () -> Void], closed: Bool)>(([], false))

    init(send: @escaping @Sendable ([UInt8]) -> Void) {
        sender = send
    }

    /// For requests that have no connection (tests, internal callers).
    static let detached = ConnectionLink(send: { _ in })

    func send(_ message: [UInt8]) { sender(message) }

    /// Keeps `task` running until the connection closes; false (and the task canceled) if it already has.
    @discardableResult
    func attach(_ task: Task<Void, Never>) -> Bool {
        let attached = subscriptions.withLockedValue { state -> Bool in
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
        let runNow = closeActions.withLockedValue { state -> Bool in
            guard !state.closed else { return true }
            state.actions.append(action)
            return false
        }
        if runNow { action() }
    }

    /// Subscribed connections are not closed for being idle.
    var hasSubscriptions: Bool { subscriptions.withLockedValue { !$0.tasks.isEmpty } }

    func close() {
        let tasks = subscriptions.withLockedValue { state -> [Task<Void, Never>] in
            state.closed = true
            defer { state.tasks.removeAll() }
            return state.tasks
        }
        for task in tasks { task.cancel() }
        let actions = closeActions.withLockedValue { state -> [@Sendable () -> Void] in
            state.closed = true
            defer { state.actions.removeAll() }
            return state.actions
        }
        for action in actions { action() }
    }
}
