import BrokerConfig
import BrokerProtocol

/// Whether brokerd can open a browser for a sign-in, and whether its configuration file loads.
enum DoctorDesktop {
    static let displayVariables = ["WAYLAND_DISPLAY", "DISPLAY"]

    /// brokerd's configuration, as it would load it; the finding says when it does not (brokerd then refuses to start).
    static func configuration(_ context: DoctorContext) -> (BrokerConfiguration?, DoctorFinding) {
        let path = context.status?.configPath ?? BrokerConfiguration.defaultPath()
        do {
            let configuration = try BrokerConfiguration.load(path: path)
            let present = context.status?.configPresent ?? (DoctorSystem.fileStatus(path) != nil)
            return (configuration, .ok("config", present ? "the configuration \(path) loads" : "no configuration file at \(path): defaults apply"))
        } catch {
            return (nil, .error("config", "the configuration cannot be loaded: \(error)",
                                fix: "Correct the file (an example: /usr/share/doc/brokerd/config.toml.example); brokerd "
                                  + "refuses to start with it, and a running brokerd keeps the settings it started with."))
        }
    }

    /// brokerd starts the browser itself (`$BROWSER`, else xdg-open), so what counts is brokerd's own environment;
    /// under systemd that is the user manager's, which a desktop session must import DISPLAY/WAYLAND_DISPLAY into.
    static func browser(_ context: DoctorContext, configuration: BrokerConfiguration?) -> DoctorFinding {
        let id = "browser"
        let policy = configuration?.openBrowser ?? .auto
        if policy == .never {
            return .ok(id, "open_browser = \"never\": sign-ins show their address or use a device code")
        }
        let session = displayVariables.filter { DoctorSystem.environment($0) != nil }
        let manager = managerEnvironment()
        if let status = context.status, let daemon = DoctorSystem.environment(ofProcess: status.pid) {
            let present = (displayVariables + ["BROWSER"]).filter { !(daemon[$0] ?? "").isEmpty }
            if !present.isEmpty {
                return .ok(id, "brokerd can start a browser ($\(present.joined(separator: ", $")) set in its environment)")
            }
            if session.isEmpty && policy == .always {
                return .warning(id, "open_browser = \"always\", but brokerd has no display and no $BROWSER: xdg-open fails "
                                + "and sign-ins wait for you to open their address", fix: "Set open_browser = \"auto\" in brokerd's "
                                + "configuration (a device code is then used without a display), or set BROWSER for brokerd.")
            }
            if session.isEmpty {
                return .ok(id, "no graphical session here (DISPLAY and WAYLAND_DISPLAY unset): sign-ins use a device code "
                           + "('brokerctl login --device-code')")
            }
            return .warning(id, "brokerd (pid \(status.pid)) has neither DISPLAY nor WAYLAND_DISPLAY: it cannot open a browser, "
                            + "so sign-ins fall back to a device code", fix: importFix(session, manager: manager, restart: true))
        }
        guard let manager else {
            return .ok(id, session.isEmpty ? "no graphical session here: sign-ins use a device code"
                       : "cannot ask systemd for its environment; a brokerd started from this session inherits "
                        + "$\(session.joined(separator: ", $"))")
        }
        let missing = session.filter { manager[$0] == nil }
        if session.isEmpty || missing.isEmpty {
            return .ok(id, session.isEmpty ? "no graphical session here: sign-ins use a device code"
                       : "the user manager has $\(session.joined(separator: ", $")): a brokerd it starts can open a browser")
        }
        return .warning(id, "your session has $\(missing.joined(separator: ", $")) but the systemd user manager does not: "
                        + "a brokerd it starts cannot open a browser", fix: importFix(missing, manager: manager, restart: false))
    }

    /// `systemctl --user show-environment`, nil when there is no user manager to ask.
    static func managerEnvironment() -> [String: String]? {
        guard let shown = DoctorSystem.run("systemctl", ["--user", "show-environment"]), shown.succeeded else { return nil }
        var variables: [String: String] = [:]
        for line in shown.stdout.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            let value = String(line[line.index(after: equals)...])
            if !value.isEmpty { variables[String(line[..<equals])] = value }
        }
        return variables
    }

    private static func importFix(_ names: [String], manager: [String: String]?, restart: Bool) -> String {
        let variables = names.isEmpty ? displayVariables : names
        let restartLine = restart ? " Then restart brokerd, which reads its environment when it starts: "
            + "systemctl --user restart \(DoctorContext.serviceUnit)" : ""
        if let manager, variables.allSatisfy({ manager[$0] != nil }) {
            return "The user manager has them now: restart brokerd, which reads its environment when it starts: "
                + "systemctl --user restart \(DoctorContext.serviceUnit)"
        }
        return "From your desktop session: 'systemctl --user import-environment \(variables.joined(separator: " "))' "
            + "(or 'dbus-update-activation-environment --systemd \(variables.joined(separator: " "))' in the session's "
            + "startup, which most desktops do).\(restartLine)"
    }
}
