import BrokerPlatform
import BrokerCache
import BrokerCore
import BrokerJSON

/// Broker request ids of the sign-ins running for D-Bus callers, and the app each is for.
final class RunningFlows: Sendable {
    private struct Starter {
        var app: AppID
        /// The unique bus name that asked for the sign-in.
        var sender: String?
    }

    private let ids = Locked<[String: Starter]>([:])
    func add(_ id: String, app: AppID, sender: String?) { ids.withLock { $0[id] = Starter(app: app, sender: sender) } }
    func remove(_ id: String) { ids.withLock { _ = $0.removeValue(forKey: id) } }

    /// The flows a cancel from this caller may end: its own (same unique name), and those of its app when the app is
    /// known (a Flatpak or snap id, or an executable). Never another app's.
    func cancellable(by caller: CallerIdentity, sender: String?) -> [String] {
        ids.withLock { flows in
            flows.filter { _, starter in
                (sender != nil && starter.sender == sender) || (caller.app.kind != .unknown && starter.app == caller.app)
            }.map(\.key)
        }
    }

    /// The flows a unique name started (it left the bus).
    func started(by sender: String) -> [String] {
        ids.withLock { $0.filter { $0.value.sender == sender }.map(\.key) }
    }
}

/// How D-Bus callers sign in (`dbus_sign_in`): they have no channel for prompts, so the sign-in UI is brokerd's.
public enum DBusSignIn: String, Sendable, CaseIterable {
    /// The system browser when brokerd can start one (a display, `$BROWSER`, `open_browser`), else a device code.
    case auto
    case browser
    case deviceCode = "device-code"
}

extension Broker1Methods {
    /// `authorizationType` 6: `username` is the login hint and `decodedClaims` the claims. The sign-in UI is the
    /// broker's: the system browser and the loopback redirect, or, without a display, a device code published in the
    /// status, as an event and as a desktop notification. The core ends a sign-in still running when `interactiveLimit`
    /// is reached (its `timeLimitSeconds`), answered UserCanceled.
    func interactiveToken(_ params: JSONObject, correlationId: String, caller: CallerIdentity, sender: String?) async -> JSONValue {
        guard let auth = params["authParameters"]?.objectValue, let clientId = auth["clientId"]?.stringValue,
              !clientId.isEmpty else {
            return Self.tokenError(status: .apiContractViolation, tag: 0x6272_0030, context: "authParameters.clientId is missing")
        }
        func text(_ key: String) -> String? { auth[key]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } }
        let scopes = Scopes.requested(auth["requestedScopes"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        // The client gives up after 300 s whatever brokerd waits for: the user's consent comes out of the sign-in's time.
        let began = ContinuousClock.now
        if case .failure(let refusal) = await apps.authorize(caller, frontEnd: "dbus", clientId: clientId,
                                                             account: text("username").map { (nil, $0) }, scopes: scopes) {
            return Self.refusal(refusal)
        }
        let limit = interactiveLimit - (ContinuousClock.now - began)
        guard limit > .seconds(10) else {
            return Self.tokenError(status: .userCanceled, tag: 0x6272_0031,
                                   context: "the user's consent took the time of the sign-in; ask again")
        }
        let (flow, why) = await signInFlow()
        logger.info("D-Bus sign-in", metadata: ["client_id": "\(clientId)", "flow": "\(flow.rawValue)", "why": "\(why)"])
        let request = InteractiveTokenRequest(
            clientId: clientId, authority: text("authority"),
            scopes: auth["requestedScopes"]?.arrayValue?.compactMap(\.stringValue) ?? [],
            loginHint: text("username"), claims: text("decodedClaims"), flow: flow,
            timeLimitSeconds: limit.components.seconds)
        let started = Locked<String?>(nil)
        let notice = Locked<Task<DesktopNotifications.Shown?, Never>?>(nil)
        let flows = self.flows, notifications = self.notifications
        defer {
            if let id = started.withLock({ $0 }) { flows.remove(id) }
        }
        let outcome: TokenOutcome
        do {
            outcome = try await broker.acquireTokenInteractively(request) { prompt in
                let id: String
                switch prompt {
                case .browser(let requestId, _): id = requestId
                case .deviceCode(let requestId, let userCode, let uri, _, _):
                    id = requestId
                    let text = Self.notificationText(clientId: clientId, loginHint: request.loginHint, userCode: userCode, uri: uri)
                    notice.withLock { $0 = Task { await notifications.show(summary: text.summary, body: text.body) } }
                }
                started.withLock { $0 = id }
                flows.add(id, app: caller.app, sender: sender)
            }
        } catch {
            await Self.close(notice.withLock { $0 }, notifications)
            apps.record(caller, frontEnd: "dbus", clientId: clientId, scopes: scopes, homeAccountId: nil, username: request.loginHint,
                        outcome: error.auditWord)
            return Self.tokenError(error)
        }
        await Self.close(notice.withLock { $0 }, notifications)
        let summary = await broker.accountSummary(homeAccountId: outcome.homeAccountId)
        let account = (homeAccountId: Optional(outcome.homeAccountId), username: summary?.username)
        if case .refuse(let refusal) = apps.decide(caller, clientId: clientId, account: account, scopes: scopes),
           refusal.reason == .outsideGrant {
            apps.record(caller, frontEnd: "dbus", clientId: clientId, scopes: scopes, homeAccountId: account.homeAccountId,
                        username: account.username, outcome: "refused", detail: "\(refusal.reason.rawValue): \(refusal.message)")
            return Self.refusal(refusal)
        }
        record(outcome, caller: caller, clientId: clientId, scopes: scopes, account: account)
        return Self.tokenResponse(outcome, correlationId: correlationId)
    }

    /// The flow for a D-Bus caller's sign-in, and why (for the log).
    func signInFlow() async -> (InteractiveTokenRequest.Flow, String) {
        switch signIn {
        case .browser: return (.browser, "dbus_sign_in = \"browser\"")
        case .deviceCode: return (.deviceCode, "dbus_sign_in = \"device-code\"")
        case .auto:
            let browser = await broker.browserAvailability()
            return (browser.available ? .browser : .deviceCode, browser.reason)
        }
    }

    static func notificationText(clientId: String, loginHint: String?, userCode: String, uri: String) -> (summary: String, body: String) {
        ("Sign-in waiting: enter \(userCode)",
         "An app (\(clientId)) asks you to sign in\(loginHint.map { " as \($0)" } ?? ""). Go to \(uri) and enter the code \(userCode).")
    }

    /// Takes the notification of a sign-in that ended off the screen.
    static func close(_ showing: Task<DesktopNotifications.Shown?, Never>?, _ notifications: DesktopNotifications) async {
        guard let showing, let shown = await showing.value else { return }
        await notifications.close(shown)
    }
}
