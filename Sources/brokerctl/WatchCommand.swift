import ArgumentParser
import BrokerClient
import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print the broker's events as they happen: accounts added and removed, sign-ins required, and "
            + "device-code sign-ins waiting for you (the code and where to enter it) until they end.",
        discussion: "Runs until interrupted or until brokerd stops (exit status 3).")
    @Option(name: .customLong("event"), help: ArgumentHelp("Only this event (repeatable): "
        + BrokerNotification.events.map(\.rawValue).joined(separator: ", ") + ".", valueName: "name"))
    var events: [String] = []
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "One JSON object per event and line.")
    var json = false
    @OptionGroup var qrCode: QROptions

    func validate() throws {
        if json, qrCode.qr == true {
            throw ValidationError("--qr does not go with --json (one JSON object per line; signIn.verificationUri is the address)")
        }
        for name in events where !BrokerNotification.events.map(\.rawValue).contains(name) {
            throw ValidationError("unknown event '\(name)' (events: \(BrokerNotification.events.map(\.rawValue).joined(separator: ", ")))")
        }
    }

    func run() async throws {
        let kinds = events.compactMap(BrokerNotification.init(rawValue:))
        let stream = try await withBroker { try await connection.control().events(kinds.isEmpty ? nil : kinds) }
        printError("brokerctl: watching brokerd's events (Ctrl-C to stop)")
        let showsQR = !json && qrCode.shows(on: 1)
        try await withBroker {
            for try await event in stream {
                Self.emit(json ? try Self.json(event) : Self.text(event, qr: showsQR))
            }
            throw BrokerError.brokerNotRunning(socket: connection.socket ?? "brokerd's socket", reason: "brokerd stopped")
        }
    }

    /// The event's line; a waiting device-code sign-in's address follows as a QR code when `qr`.
    static func text(_ event: BrokerEvent, qr: Bool) -> String {
        let line = Format.timeOfDay(Format.now()) + "  " + Format.event(event, now: Format.now())
        guard qr, event.kind == .signInPending, let signIn = event.signIn,
              let code = TerminalQR.text(for: signIn.verificationUri) else { return line }
        return line + "\n" + code
    }

    /// Written at once (not through stdio's buffer): a reader of a pipe sees each event when it happens.
    static func emit(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        bytes.withUnsafeMutableBytes { _ = write(1, $0.baseAddress, $0.count) }
    }

    static func json(_ event: BrokerEvent) throws -> String {
        String(decoding: try ProtocolCoding.encode(WatchedEvent(event)), as: UTF8.self)
    }
}

/// `brokerctl watch --json`: the event's name and its fields.
struct WatchedEvent: Encodable {
    var event: String
    var homeAccountId: String?
    var clientId: String?
    var requestId: String?
    var outcome: String?
    var signIn: PendingSignInInfo?
    var consent: PendingConsentInfo?

    init(_ e: BrokerEvent) {
        (event, homeAccountId, clientId, requestId, outcome, signIn) = (e.kind.rawValue, e.homeAccountId, e.clientId, e.requestId, e.outcome, e.signIn)
        consent = e.consent
    }
}

extension Format {
    /// One line for an event of `brokerctl watch`.
    static func event(_ e: BrokerEvent, now: Int64) -> String {
        let app = e.clientId.map { " for app \($0)" } ?? ""
        switch e.kind {
        case .accountAdded: return "account added: \(e.homeAccountId ?? "?")"
        case .accountRemoved:
            return "account removed: \(e.homeAccountId ?? "?")" + (e.clientId.map { " from app \($0)" } ?? " everywhere")
        case .signInRequired: return "sign-in required: \(e.homeAccountId ?? "?")\(app) (its refresh token was refused)"
        case .statusChanged: return "status changed"
        case .signInPending: return e.signIn.map { "sign-in waiting: " + waitingSignIn($0, now: now) } ?? "sign-in waiting\(app)"
        case .signInEnded: return "sign-in \(e.outcome ?? "ended")\(app)"
        case .consentPending:
            return e.consent.map { "consent waiting: " + waitingConsent($0, now: now) } ?? "consent waiting\(app)"
        case .consentEnded:
            return "consent \(e.outcome ?? "ended"): \(e.consent?.app ?? "?") for client ID \(e.clientId ?? "?")"
        case .browserUrl, .deviceCode: return e.kind.rawValue
        }
    }

    static func localTime(_ epoch: Int64) -> tm {
        var seconds = time_t(epoch)
        var parts = tm()
        localtime_r(&seconds, &parts)
        return parts
    }

    /// Local time, `HH:MM:SS`.
    static func timeOfDay(_ epoch: Int64) -> String {
        let parts = localTime(epoch)
        return [parts.tm_hour, parts.tm_min, parts.tm_sec].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined(separator: ":")
    }

    /// "APP asks for client ID X (N waiting, refused in M min): brokerctl apps allow APP --client-id X".
    static func waitingConsent(_ c: PendingConsentInfo, now: Int64) -> String {
        let left = c.expiresOn - now
        return "\(c.app) asks for client ID \(c.clientId) (\(c.waiting) request\(c.waiting == 1 ? "" : "s") waiting"
            + (left > 0 ? ", refused \(relative(left)))" : ")")
            + ": brokerctl apps allow \(c.app) --client-id \(c.clientId)"
    }

    /// "go to URL and enter CODE (for app X as HINT, expires in N min)".
    static func waitingSignIn(_ s: PendingSignInInfo, now: Int64) -> String {
        let left = s.expiresOn - now
        return "go to \(s.verificationUri) and enter \(s.userCode) (for app \(s.clientId)"
            + (s.loginHint.map { " as \($0)" } ?? "") + (left > 0 ? ", expires \(relative(left)))" : ", expired)")
    }
}
