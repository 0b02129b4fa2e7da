import ArgumentParser
import BrokerClient
import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Find out what keeps brokerd from working, and how to fix it.",
        discussion: """
            Checks, each with a fix in plain words: whether brokerd answers on its socket and its systemd user units \
            (brokerd.socket, brokerd.service); the socket's and its directory's ownership and modes; the configuration \
            file; who owns com.microsoft.identity.broker1 on the session bus (brokerd, another broker or nobody); the key \
            store and whether the Secret Service's default collection is locked; whether brokerd can open a browser \
            (DISPLAY or WAYLAND_DISPLAY in its environment and the user manager's); the identity providers brokerd could \
            not reach, the age of each discovery document, and a TCP connection from here to each provider (3 s at \
            most); the clock against the providers' Date headers; free space in the state directory; sign-ins and app \
            consents waiting for you. \
            When brokerd does not answer, every check that does not need it still runs, and doctor says how to start \
            brokerd. systemctl and busctl are asked when installed; without a systemd user manager or a session bus \
            doctor says so, which is not an error by itself. \
            Each finding is ok, a warning (brokerd works, but something will bite: a locked keyring, a sign-in \
            waiting) or an error (something does not work now). Exit status: 0 no errors (warnings may be shown), \
            1 at least one error, or with --strict at least one warning, 64 usage error. \
            --json prints {"findings": [{"id", "status", "message", "fix", "subject"}], "errors": N, "warnings": N}; \
            "fix" and "subject" are present when there is something to do or to name.
            """)
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Print the findings as JSON (id, status, message, fix, subject).")
    var json = false
    @Flag(help: "Exit with status 1 on warnings too.")
    var strict = false

    func run() async throws {
        let context = await Self.gatherContext(socket: connection.socket)
        let findings = Self.findings(context)
        if json {
            try printJSON(DoctorReport(findings: findings))
        } else {
            print(Self.render(findings))
        }
        let errors = findings.contains { $0.status == .error }
        let warnings = findings.contains { $0.status == .warning }
        if errors || (strict && warnings) { throw ExitCode(ExitStatus.failed) }
    }

    /// getStatus on a connection of its own, without the protocol version check: doctor reports a mismatch, it does
    /// not refuse to look.
    static func gatherContext(socket: String?) async -> DoctorContext {
        let connection = BrokerConnection(socketPath: socket, timeoutSeconds: 15, blockingCalls: true)
        var context = DoctorContext(socketPath: SocketLocation.resolve(explicit: socket), status: nil, failure: nil,
                                    now: Format.now())
        do {
            context.status = try await connection.call(.getStatus, as: StatusResult.self)
        } catch let BrokerClientError.brokerNotRunning(_, reason) {
            context.failure = reason
        } catch {
            context.failure = "\(error)"
        }
        await connection.disconnect()
        return context
    }

    /// Every check, in the order a person would look: brokerd, how it is started, its socket, its configuration, the
    /// session around it, the network, the disk, and what waits for the user.
    static func findings(_ context: DoctorContext) -> [DoctorFinding] {
        var findings = [DoctorChecks.reachability(context)]
        findings += [DoctorChecks.versionMatch(context)].compactMap { $0 }
        findings += DoctorChecks.reportedProblems(context)
        findings += DoctorSession.systemdUnits(context)
        findings.append(DoctorChecks.socketDirectory(context))
        findings += [DoctorChecks.socketFile(context)].compactMap { $0 }
        let (configuration, configFinding) = DoctorDesktop.configuration(context)
        findings.append(configFinding)
        findings.append(DoctorSession.busName(context))
        findings.append(DoctorSession.keyStore(context, configuration: configuration))
        findings.append(DoctorDesktop.browser(context, configuration: configuration))
        findings += DoctorNetwork.reachability(context, configuration: configuration)
        findings.append(DoctorNetwork.clock(context))
        findings.append(DoctorChecks.diskSpace(context))
        findings += DoctorChecks.waitingForUser(context)
        return findings
    }

    static func render(_ findings: [DoctorFinding]) -> String {
        var lines: [String] = []
        for finding in findings {
            let mark = switch finding.status {
            case .ok: "ok     "
            case .warning: "WARNING"
            case .error: "ERROR  "
            }
            lines.append("\(mark)  \(finding.message)")
            if let fix = finding.fix { lines.append("         fix: \(fix)") }
        }
        let errors = findings.filter { $0.status == .error }.count, warnings = findings.filter { $0.status == .warning }.count
        lines.append("")
        lines.append(errors == 0 && warnings == 0 ? "Everything looks right."
                     : "\(errors) error\(errors == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s").")
        return lines.joined(separator: "\n")
    }
}

/// `brokerctl doctor --json`.
struct DoctorReport: Encodable {
    var findings: [DoctorFinding]
    var errors: Int
    var warnings: Int

    init(findings: [DoctorFinding]) {
        self.findings = findings
        errors = findings.filter { $0.status == .error }.count
        warnings = findings.filter { $0.status == .warning }.count
    }
}
