import BrokerConfig
import BrokerCore
import BrokerPlatform
import Logging

/// What a `[hooks]` command is told of a broker event: which hook it is and its environment variables. Never a token,
/// a refresh token or a device code: identifiers, the user code (meant for the user's eyes) and where to enter it.
struct HookEvent: Equatable {
    typealias Event = BrokerConfiguration.Hooks.Event

    let event: Event
    /// The account the event is about, when it names one (for BROKERD_USERNAME).
    let homeAccountId: String?
    private(set) var variables: [String: String]

    /// Every variable a hook may get: inherited ones of these names are removed, so that a value in brokerd's own
    /// environment never passes for the event's.
    static let variableNames: Set<String> = [
        "BROKERD_EVENT", "BROKERD_ACCOUNT", "BROKERD_USERNAME", "BROKERD_CLIENT_ID", "BROKERD_AUTHORITY",
        "BROKERD_USER_CODE", "BROKERD_VERIFICATION_URI", "BROKERD_MESSAGE", "BROKERD_EXPIRES_ON", "BROKERD_REQUEST_ID",
        "BROKERD_REASON", "BROKERD_RETRY_IN",
    ]

    /// The hook of `event`, or nil when no hook is about it.
    init?(_ event: BrokerEvent) {
        switch event {
        case .signInRequired(let hid, let clientId):
            self.init(.signInRequired, account: hid, ["BROKERD_CLIENT_ID": clientId])
        case .signInPending(let pending):
            var variables = [
                "BROKERD_CLIENT_ID": pending.clientId, "BROKERD_USER_CODE": pending.userCode,
                "BROKERD_VERIFICATION_URI": pending.verificationURI, "BROKERD_MESSAGE": pending.message,
                "BROKERD_EXPIRES_ON": "\(pending.expiresOn)", "BROKERD_REQUEST_ID": pending.requestId,
            ]
            // The account is not known before the sign-in; the app may have said whom it expects.
            if let hint = pending.loginHint, !hint.isEmpty { variables["BROKERD_USERNAME"] = hint }
            self.init(.signInPending, account: nil, variables)
        case .browserSignInPending(let requestId, let clientId, let loginHint, let url):
            var variables = ["BROKERD_CLIENT_ID": clientId, "BROKERD_VERIFICATION_URI": url, "BROKERD_REQUEST_ID": requestId]
            if let loginHint, !loginHint.isEmpty { variables["BROKERD_USERNAME"] = loginHint }
            self.init(.signInPending, account: nil, variables)
        case .tokenRefreshed(let hid, let clientId, let authority):
            self.init(.tokenRefreshed, account: hid, ["BROKERD_CLIENT_ID": clientId, "BROKERD_AUTHORITY": authority])
        case .refreshFailed(let hid, let clientId, let authority, let reason, let retryIn):
            self.init(.refreshFailed, account: hid, [
                "BROKERD_CLIENT_ID": clientId, "BROKERD_AUTHORITY": authority, "BROKERD_REASON": reason,
                "BROKERD_RETRY_IN": "\(retryIn)",
            ])
        case .accountAdded, .accountRemoved, .statusChanged, .signInEnded, .consentPending, .consentEnded:
            return nil
        }
    }

    private init(_ event: Event, account: String?, _ variables: [String: String]) {
        self.event = event
        homeAccountId = account
        self.variables = variables
        self.variables["BROKERD_EVENT"] = event.rawValue
        if let account { self.variables["BROKERD_ACCOUNT"] = account }
    }

    mutating func setUsername(_ username: String) {
        if !username.isEmpty { variables["BROKERD_USERNAME"] = username }
    }

    /// brokerd's environment (`inherited`) with this event's variables.
    func environment(inherited: [String]) -> [String] {
        ChildEnvironment.merged(inherited: inherited, reserved: Self.variableNames,
                                variables: variables.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) })
    }
}

/// Runs the `[hooks]` commands on broker events, off the broker actor: each command on a thread of its own (ChildCommand),
/// at most `maximumRunning` at once. An event that finds them all busy waits in a queue of at most `maximumWaiting`;
/// past that it is dropped, and the log says so. A hook still running when brokerd stops is left to finish (under
/// systemd the unit's stop ends it).
actor HookRunner {
    static let maximumRunning = 4
    static let maximumWaiting = 16

    private struct Invocation {
        var hook: HookEvent
        var command: String
        var timeoutSeconds: Int
    }

    private var settings: BrokerConfiguration.Hooks
    private let logger: Logger
    private var running = 0
    private var waiting: [Invocation] = []
    private var subscription: Task<Void, Never>?

    private init(settings: BrokerConfiguration.Hooks, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// Subscribes to `broker`'s events before it returns, so that no event after the start is missed.
    static func start(broker: Broker, settings: BrokerConfiguration.Hooks, logger: Logger) async -> HookRunner {
        let runner = HookRunner(settings: settings, logger: logger)
        await runner.listen(to: await broker.events(), of: broker)
        if !settings.commands.isEmpty { runner.logConfigured(settings) }
        return runner
    }

    /// New `[hooks]` settings (SIGHUP) apply to the events from now on; running hooks keep theirs.
    func update(_ updated: BrokerConfiguration.Hooks) {
        guard updated != settings else { return }
        settings = updated
        logConfigured(updated)
    }

    /// No more events; waiting ones are not run.
    func stop() {
        subscription?.cancel()
        subscription = nil
        waiting.removeAll()
    }

    private nonisolated func logConfigured(_ settings: BrokerConfiguration.Hooks) {
        logger.info("hooks configured", metadata: [
            "events": "\(settings.commands.keys.map(\.rawValue).sorted().joined(separator: ","))",
            "timeout_s": "\(settings.timeoutSeconds)",
        ])
    }

    private func listen(to events: AsyncStream<BrokerEvent>, of broker: Broker) {
        subscription = Task { [weak self] in
            for await event in events {
                guard let runner = self else { return }
                guard var hook = HookEvent(event), await runner.hasCommand(for: hook.event) else { continue }
                if let hid = hook.homeAccountId, let summary = await broker.accountSummary(homeAccountId: hid) {
                    hook.setUsername(summary.username)
                }
                await runner.submit(hook)
            }
        }
    }

    private func hasCommand(for event: HookEvent.Event) -> Bool { settings.commands[event] != nil }

    private func submit(_ hook: HookEvent) {
        guard let command = settings.commands[hook.event] else { return }
        let invocation = Invocation(hook: hook, command: command, timeoutSeconds: settings.timeoutSeconds)
        if running < Self.maximumRunning {
            launch(invocation)
        } else if waiting.count < Self.maximumWaiting {
            waiting.append(invocation)
            logger.debug("hook waits for a free slot", metadata: ["hook": "\(hook.event.rawValue)", "waiting": "\(waiting.count)"])
        } else {
            let busy = "\(Self.maximumRunning) hooks are running and \(Self.maximumWaiting) wait"
            logger.warning("hook not run: \(busy); this event is dropped", metadata: ["hook": "\(hook.event.rawValue)"])
        }
    }

    private func launch(_ invocation: Invocation) {
        running += 1
        let logger = self.logger
        let child = ChildCommand(command: invocation.command,
                                 environment: invocation.hook.environment(inherited: ChildEnvironment.current()),
                                 timeoutSeconds: invocation.timeoutSeconds)
        let name = invocation.hook.event.rawValue
        logger.debug("running hook", metadata: ["hook": "\(name)"])
        Task {
            let report = await child.run { stream, line in
                logger.info("hook \(name) \(stream.rawValue): \(line)", metadata: ["hook": "\(name)", "stream": "\(stream.rawValue)"])
            }
            Self.log(report, hook: name, timeoutSeconds: invocation.timeoutSeconds, logger: logger)
            self.finished()
        }
    }

    private func finished() {
        running -= 1
        if !waiting.isEmpty { launch(waiting.removeFirst()) }
    }

    private static func log(_ report: ChildReport, hook name: String, timeoutSeconds: Int, logger: Logger) {
        let metadata: Logger.Metadata = ["hook": "\(name)", "pid": "\(report.pid)"]
        if report.droppedOutputBytes > 0 {
            logger.notice("hook \(name): \(report.droppedOutputBytes) bytes of its output were not logged (too long)", metadata: metadata)
        }
        switch report.end {
        case .exited(status: 0):
            logger.debug("hook \(name) finished", metadata: metadata)
        case .exited(let status):
            logger.warning("hook \(name) failed with exit status \(status)", metadata: metadata)
        case .killedBySignal(let signal):
            logger.warning("hook \(name) was killed by signal \(signal)", metadata: metadata)
        case .timedOut:
            logger.warning("hook \(name) still ran after its timeout of \(timeoutSeconds) s: its process group was killed",
                           metadata: metadata)
        case .notStarted(let reason):
            logger.error("hook \(name) could not start: \(reason)", metadata: metadata)
        }
    }
}
