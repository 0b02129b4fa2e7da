import BrokerCache
import BrokerCore
import BrokerJSON
import Logging

/// The eight methods of `com.microsoft.identity.Broker1`, translated onto the broker: request JSON in, response
/// JSON out, shapes as the real clients send and accept them (shared/reference/linux-broker-dbus.md). No silent
/// algorithm, cache or account model of its own: this layer only translates.
public struct Broker1Methods: Sendable {
    let broker: Broker
    /// The app policy every token request goes through, and the audit.
    let apps: AppAccess
    let version: String
    let logger: Logger
    /// Sign-ins running for D-Bus callers (their broker request ids), for cancelInteractiveFlow.
    let flows = RunningFlows()
    /// Under the clients' 300 s D-Bus call timeout, so that a sign-in that runs out is answered (UserCanceled)
    /// instead of the caller getting NoReply.
    let interactiveLimit: Duration
    /// Browser or device code for a sign-in (`dbus_sign_in`).
    let signIn: DBusSignIn
    /// A waiting device code on the desktop.
    let notifications: DesktopNotifications

    public init(broker: Broker, apps: AppAccess, version: String, logger: Logger, interactiveLimit: Duration = .seconds(285),
                signIn: DBusSignIn = .auto) {
        self.broker = broker
        self.apps = apps
        self.version = version
        self.logger = logger
        self.interactiveLimit = interactiveLimit
        self.signIn = signIn
        notifications = DesktopNotifications(logger: logger)
    }

    /// `caller`: who the front end found the sender to be (the uid is checked already); `sender`: its unique name.
    public func answer(method: String, correlationId: String, request: String, caller: CallerIdentity,
                       sender: String? = nil) async -> String {
        let params: JSONObject
        switch Broker1Requests.validated(method: method, correlationId: correlationId, request: request) {
        case .success(let object): params = object
        case .failure(let problem):
            logger.notice("D-Bus request refused", metadata: [
                "method": "\(method)", "reason": "\(problem.reason)", "client_pid": "\(caller.pid)",
                "client_exe": "\(caller.executable ?? "?")",
            ])
            return JSONWriter().string(Self.tokenError(status: .apiContractViolation, tag: 0x6272_0006, context: problem.reason))
        }
        await broker.loaded()
        let response: JSONValue
        switch method {
        case "getLinuxBrokerVersion":
            response = .object(JSONObject(["linuxBrokerVersion": .string(version)]))
        case "getAccounts":
            response = await accounts(params, caller: caller)
        case "acquireTokenSilently":
            response = await silentToken(params, correlationId: correlationId, caller: caller)
        case "removeAccount":
            response = await removeAccount(params, caller: caller)
        case "cancelInteractiveFlow":
            // The request names no flow (pymsalruntime sends an error object with a new correlation id): the caller's
            // own sign-ins end (its connection's, and its app's), never another app's. `{}` is what the client accepts.
            let ending = flows.cancellable(by: caller, sender: sender)
            for id in ending { _ = await broker.cancelInteractiveFlow(id) }
            logger.info("D-Bus cancelInteractiveFlow ended \(ending.count) sign-in(s)", metadata: ["app": "\(caller.app)"])
            response = .object(JSONObject())
        case "acquireTokenInteractively":
            response = await interactiveToken(params, correlationId: correlationId, caller: caller, sender: sender)
        case "acquirePrtSsoCookie":
            response = Self.tokenError(status: .deviceNotRegistered, tag: 0x6272_0002,
                                       context: "brokerd holds no Primary Refresh Token: the device is not joined to Entra ID")
        case "generateSignedHttpRequest":
            response = Self.tokenError(status: .apiContractViolation, tag: 0x6272_0003,
                                       context: "brokerd does not hold proof-of-possession keys (no signed HTTP requests)")
        default:
            response = Self.tokenError(status: .apiContractViolation, tag: 0x6272_0004, context: "unknown method \(method)")
        }
        logger.info("D-Bus request", metadata: [
            "method": "\(method)", "client_pid": "\(caller.pid)", "client_exe": "\(caller.executable ?? "?")", "app": "\(caller.app)",
        ])
        return JSONWriter().string(response)
    }

    /// A caller left the bus (its unique name lost its owner): the sign-ins it started end, since nobody waits for them.
    public func callerLeft(_ sender: String) async {
        let running = flows.started(by: sender)
        guard !running.isEmpty else { return }
        logger.info("D-Bus caller left the bus; its sign-ins end", metadata: ["sender": "\(sender)", "sign_ins": "\(running.count)"])
        for id in running { _ = await broker.cancelInteractiveFlow(id) }
    }

    // MARK: getAccounts

    /// The accounts the client sees, with the five fields libmsalruntime requires (an account without one of them is
    /// dropped by the client) plus names and clientInfo.
    func accounts(_ params: JSONObject, caller: CallerIdentity) async -> JSONValue {
        let clientId = params["clientId"]?.stringValue
        // An app the policy does not allow this client ID (yet) sees no account: a list is no reason to ask the user.
        guard let clientId, case .allow = apps.decide(caller, clientId: clientId, account: nil, scopes: []) else {
            return .object(JSONObject(["accounts": .array([])]))
        }
        let summaries = apps.visible(await broker.accounts(visibleTo: clientId), to: caller, clientId: clientId)
        return .object(JSONObject(["accounts": .array(summaries.map(Self.account))]))
    }

    static func account(_ summary: AccountSummary) -> JSONValue {
        let ids = HomeAccountId(summary.homeAccountId)
        var members: [JSONObject.Member] = [
            .init(key: "homeAccountId", value: .string(summary.homeAccountId)),
            .init(key: "environment", value: .string(summary.environment)),
            .init(key: "realm", value: .string(summary.realm)),
            .init(key: "localAccountId", value: .string(summary.localAccountId ?? ids?.uid ?? "")),
            .init(key: "username", value: .string(summary.username)),
        ]
        if let name = summary.name { members.append(.init(key: "name", value: .string(name))) }
        if let ids { members.append(.init(key: "clientInfo", value: .string(ids.clientInfo))) }
        return .object(JSONObject(members))
    }

    // MARK: removeAccount

    func removeAccount(_ params: JSONObject, caller: CallerIdentity) async -> JSONValue {
        guard let clientId = params["clientId"]?.stringValue,
              let hid = (params["account"]?.objectValue ?? params)["homeAccountId"]?.stringValue else {
            return Self.tokenError(status: .apiContractViolation, tag: 0x6272_0005,
                                   context: "removeAccount needs clientId and account.homeAccountId")
        }
        let username = await broker.accountSummary(homeAccountId: hid)?.username
        if case .failure(let refusal) = await apps.authorize(caller, frontEnd: "dbus", clientId: clientId, account: (hid, username),
                                                             scopes: []) {
            return Self.refusal(refusal)
        }
        do {
            _ = try await broker.removeAccount(.homeAccountId(hid), forClient: clientId)
        } catch {
            logger.notice("D-Bus removeAccount: \(error)")
        }
        return .object(JSONObject())
    }
}

/// `<uid>.<utid>` (Entra's home account id) and the client_info it stands for.
struct HomeAccountId {
    var uid: String
    var utid: String

    init?(_ text: String) {
        // Found in place: splitting made an array of the parts first, on every token answer.
        let utf8 = text.utf8, dot = UInt8(ascii: ".")
        guard let split = utf8.firstIndex(of: dot), split != utf8.startIndex else { return nil }
        let rest = utf8.index(after: split)
        guard rest != utf8.endIndex, !utf8[rest...].contains(dot) else { return nil }
        uid = String(Substring(utf8[..<split]))
        utid = String(Substring(utf8[rest...]))
    }

    /// base64url (no padding) of `{"uid":…,"utid":…}`: the client builds msal's home_account_id from it.
    var clientInfo: String {
        var text: [UInt8] = []
        writeClientInfo(into: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// `clientInfo`, appended to `out` (every token answer carries it).
    func writeClientInfo(into out: inout [UInt8]) {
        // Written directly: the bytes JSONWriter gives for {"uid":…,"utid":…}.
        var json: [UInt8] = []
        json.reserveCapacity(uid.utf8.count + utid.utf8.count + 20)
        json.append(contentsOf: #"{"uid":"#.utf8)
        JSONWriter.writeString(uid, into: &json)
        json.append(contentsOf: #","utid":"#.utf8)
        JSONWriter.writeString(utid, into: &json)
        json.append(UInt8(ascii: "}"))
        Base64URL.encode(json, into: &out)
    }
}
