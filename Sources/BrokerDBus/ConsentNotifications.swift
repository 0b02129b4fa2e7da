import BrokerCore
import BrokerPlatform
import CSystemd
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A pending consent on the desktop: an `org.freedesktop.Notifications` notification with the actions "Allow",
/// "Allow once" and "Deny", whose `ActionInvoked` signal answers the consent (AppAccess). brokerd closes it when the
/// consent ends however it ends (an action, `brokerctl apps`, the timeout). Without a session bus or a notification
/// server, consents are answered with `brokerctl apps` only.
///
/// Threading as DBusFrontEnd: one thread owns the connection; others post work to it through a queue and an eventfd.
/// Only signals sent by the server that showed the notification (its unique name) are believed: another process of
/// the session cannot answer a consent by sending a forged ActionInvoked.
public final class ConsentNotifications: @unchecked Sendable {
    private enum Work {
        case show(PendingConsent)
        case close(consentId: String)
    }

    private let bus: OpaquePointer
    private let wake: Int32
    private let apps: AppAccess
    private let logger: Logger
    private let target: UnsafeMutablePointer<brokerd_notification_target>
    private let work = Locked<[Work]>([])
    private let stopping = Atomic<Bool>(false)
    private var thread: JoinableThread<Void>?
    private var events: Task<Void, Never>?
    /// On the bus thread: the notification shown for each consent, and who showed it.
    private var shown: [UInt32: (consentId: String, server: String)] = [:]

    private init(bus: OpaquePointer, wake: Int32, apps: AppAccess, logger: Logger) {
        self.bus = bus
        self.wake = wake
        self.apps = apps
        self.logger = logger
        target = .allocate(capacity: 1)
    }

    /// Watches the broker's consent events and shows each pending consent; nil (logged) without a session bus.
    public static func start(broker: Broker, apps: AppAccess, logger: Logger) async -> ConsentNotifications? {
        var opened: OpaquePointer?
        let r = sd_bus_open_user(&opened)
        guard r >= 0, let bus = opened else {
            logger.notice("consents will not show as desktop notifications: no session bus",
                          metadata: ["error": "\(DBusFrontEnd.errorText(r))"])
            return nil
        }
        _ = sd_bus_set_method_call_timeout(bus, DesktopNotifications.callTimeoutMicroseconds)
        let wake = brokerd_wake_fd()
        guard wake >= 0 else {
            sd_bus_flush_close_unref(bus)
            return nil
        }
        let notifier = ConsentNotifications(bus: bus, wake: wake, apps: apps, logger: logger)
        notifier.target.initialize(to: brokerd_notification_target(handler: { id, action, sender, context in
            guard let context else { return }
            Unmanaged<ConsentNotifications>.fromOpaque(context).takeUnretainedValue()
                .signal(id: id, action: action.map { String(cString: $0) }, sender: sender.map { String(cString: $0) } ?? "")
        }, context: Unmanaged.passUnretained(notifier).toOpaque()))
        guard brokerd_watch_notifications(bus, notifier.target) >= 0 else {
            logger.notice("consents will not show as desktop notifications: cannot watch the notification server's signals")
            sd_bus_flush_close_unref(bus)
            _ = close(wake)
            return nil
        }
        notifier.startThread()
        let stream = await broker.events()
        notifier.events = Task {
            for await event in stream {
                switch event {
                case .consentPending(let consent): notifier.post(.show(consent))
                case .consentEnded(let consent, _): notifier.post(.close(consentId: consent.consentId))
                default: break
                }
            }
        }
        return notifier
    }

    public func stop() {
        guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        events?.cancel()
        signalWake()
        thread?.join()
        sd_bus_flush_close_unref(bus)
        _ = close(wake)
    }

    private func post(_ item: Work) {
        work.withLock { $0.append(item) }
        signalWake()
    }

    private func signalWake() { BusLoop.signal(wake) }

    // MARK: The bus thread

    private func startThread() {
        // The thread holds the front end until its loop ends.
        thread = JoinableThread.start { [self] in run() }
    }

    private func run() {
        let failure = BusLoop.run(bus, wake: wake, stopping: { stopping.load(ordering: .sequentiallyConsistent) }) {
            for item in work.withLock({ items -> [Work] in defer { items = [] }; return items }) { perform(item) }
        }
        if let failure {
            logger.notice("consent notifications stop: the session bus connection failed",
                          metadata: ["error": "\(DBusFrontEnd.errorText(failure))"])
        }
    }

    private func perform(_ item: Work) {
        switch item {
        case .show(let consent):
            guard brokerd_bus_name_has_owner(bus, DesktopNotifications.serverName) > 0 else {
                logger.info("no desktop notification for the consent: no notification server on the session bus")
                return
            }
            let summary = "\(Self.name(of: consent.app)) asks for your sign-in"
            let body = "\(consent.app) wants the tokens of app registration \(consent.clientId)"
                + (consent.executable.map { " (running \($0))" } ?? "") + ". Allow it?"
            var id: UInt32 = 0
            var server = [CChar](repeating: 0, count: 256), error = [CChar](repeating: 0, count: 512)
            guard brokerd_notify_consent(bus, summary, body, &id, &server, server.count, &error, error.count) >= 0 else {
                logger.warning("consent notification failed", metadata: ["error": "\(DesktopNotifications.text(error))"])
                return
            }
            shown[id] = (consent.consentId, DesktopNotifications.text(server))
            logger.info("consent notification shown", metadata: ["notification_id": "\(id)", "consent_id": "\(consent.consentId)"])
        case .close(let consentId):
            for (id, entry) in shown where entry.consentId == consentId {
                shown[id] = nil
                var error = [CChar](repeating: 0, count: 512)
                if brokerd_close_notification(bus, id, &error, error.count) < 0 {
                    logger.notice("consent notification not closed", metadata: ["error": "\(DesktopNotifications.text(error))"])
                }
            }
        }
    }

    /// On the bus thread, from a signal of the notification server.
    private func signal(id: UInt32, action: String?, sender: String) {
        guard let entry = shown[id], entry.server == sender else { return }
        guard let action else {
            shown[id] = nil  // dismissed: the consent waits on for brokerctl or its timeout
            return
        }
        let answer: ConsentAnswer
        switch action {
        case "allow": answer = .allow
        case "allow-once": answer = .allowOnce
        case "deny": answer = .deny
        default: return
        }
        logger.notice("consent answered from the desktop", metadata: ["consent_id": "\(entry.consentId)", "answer": "\(answer.rawValue)"])
        let apps = self.apps, logger = self.logger
        Task {
            do { try await apps.answer(consentId: entry.consentId, with: answer) } catch {
                logger.error("consent answer not kept: \(error)")
            }
        }
    }

    /// A Flatpak's or snap's name, or an executable's file name, for the notification's title.
    static func name(of app: AppID) -> String {
        app.kind == .exe ? String(app.name.split(separator: "/").last ?? Substring(app.name)) : app.name
    }
}
