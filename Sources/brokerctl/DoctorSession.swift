import BrokerConfig
import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The checks of the user's session around brokerd: systemd user units, the session bus, the Secret Service and
/// the graphical environment. They ask systemctl and busctl; without them (or without a user manager or a bus) they
/// say so, which is not an error by itself: brokerd also runs without systemd and without D-Bus.
enum DoctorSession {
    static let brokerBusName = "com.microsoft.identity.broker1"

    // MARK: systemd

    /// The units' states, by unit name; nil with the reason when there is no user manager to ask.
    static func unitStates() -> (units: [String: [String: String]]?, unavailable: String?) {
        let properties = "Id,LoadState,ActiveState,SubState,UnitFileState,Result,ExecMainStatus,MainPID"
        guard let shown = DoctorSystem.run("systemctl", ["--user", "show", DoctorContext.socketUnit, DoctorContext.serviceUnit,
                                                         "-p", properties]) else {
            return (nil, "systemctl is not installed")
        }
        guard shown.succeeded else { return (nil, "no systemd user manager (\(shown.stderr.trimmingNewlines()))") }
        var units: [String: [String: String]] = [:]
        for block in shown.stdout.split(separator: "\n", omittingEmptySubsequences: false).split(separator: "") {
            var properties: [String: String] = [:]
            for line in block {
                guard let equals = line.firstIndex(of: "=") else { continue }
                properties[String(line[..<equals])] = String(line[line.index(after: equals)...])
            }
            if let id = properties["Id"] { units[id] = properties }
        }
        return (units, nil)
    }

    static func systemdUnits(_ context: DoctorContext) -> [DoctorFinding] {
        let (found, unavailable) = unitStates()
        guard let units = found else {
            let running = context.status.map { "brokerd (pid \($0.pid)) runs without it" } ?? "brokerd must be started by hand ('brokerd')"
            return [.ok("systemd.units", "cannot ask systemd: \(unavailable ?? "unknown reason"); \(running)")]
        }
        let socket = units[DoctorContext.socketUnit] ?? [:], service = units[DoctorContext.serviceUnit] ?? [:]
        return [socketUnit(socket, context), serviceUnit(service, context)].compactMap { $0 }
    }

    private static func socketUnit(_ unit: [String: String], _ context: DoctorContext) -> DoctorFinding {
        let id = "systemd.socket", name = DoctorContext.socketUnit
        let enable = "systemctl --user enable --now \(name)"
        if unit["LoadState"] != "loaded" {
            let text = "\(name) is not installed (LoadState=\(unit["LoadState"] ?? "unknown"))"
            let fix = "Install brokerd's package, or copy systemd/brokerd.socket and systemd/brokerd.service to "
                + "~/.config/systemd/user/, then: systemctl --user daemon-reload && \(enable)"
            return context.status == nil ? .error(id, text + ": nothing starts brokerd", fix: fix)
                : .warning(id, text + "; brokerd runs without it and does not start by itself at login", fix: fix)
        }
        let active = unit["ActiveState"] ?? "unknown", enabled = unit["UnitFileState"] ?? "unknown"
        if active != "active" {
            let text = "\(name) is \(active) (\(unit["SubState"] ?? "")), \(enabled)"
            return context.status == nil ? .error(id, text + ": nothing listens for brokerd", fix: enable)
                : .warning(id, text + "; the brokerd answering was started another way", fix: enable)
        }
        if enabled != "enabled" && enabled != "static" && enabled != "enabled-runtime" {
            return .warning(id, "\(name) listens but is \(enabled): it will not listen after your next login", fix: enable)
        }
        return .ok(id, "\(name) is active (\(unit["SubState"] ?? "listening")) and \(enabled)")
    }

    private static func serviceUnit(_ unit: [String: String], _ context: DoctorContext) -> DoctorFinding? {
        let id = "systemd.service", name = DoctorContext.serviceUnit
        guard unit["LoadState"] == "loaded" else { return nil }
        let active = unit["ActiveState"] ?? "unknown"
        let journal = "journalctl --user -u \(name) -n 50"
        if active == "failed" {
            let status = unit["ExecMainStatus"] ?? ""
            let why = status == "75" ? ": the Secret Service holding brokerd's key was locked or gone (exit status 75)"
                : " (result \(unit["Result"] ?? "unknown"), exit status \(status))"
            return .error(id, "\(name) failed\(why)", fix: "See why: '\(journal)'. Then: systemctl --user reset-failed \(name) "
                          + "&& systemctl --user start \(DoctorContext.socketUnit)")
        }
        if active == "active", let status = context.status, let main = unit["MainPID"].flatMap(Int32.init), main > 0,
           main != status.pid {
            return .warning(id, "\(name) runs as pid \(main), but the brokerd answering on \(status.socket) is pid \(status.pid)",
                            fix: "Stop the other brokerd (pid \(status.pid)) and let systemd's serve: systemctl --user restart \(name)")
        }
        if active == "active" { return .ok(id, "\(name) is active (pid \(unit["MainPID"] ?? "?"))") }
        return .ok(id, "\(name) is \(active): \(DoctorContext.socketUnit) starts it on the first request")
    }

    // MARK: D-Bus

    /// busctl on the user's session bus ($DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus), as brokerd sees it.
    static func busctl(_ arguments: [String]) -> DoctorSystem.Output? {
        DoctorSystem.run("busctl", ["--user", "--timeout=5"] + arguments)
    }

    static func busDaemonCall(_ method: String, _ name: String) -> DoctorSystem.Output? {
        busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", method, "s", name])
    }

    /// Who owns com.microsoft.identity.broker1: MSAL apps (msal-python's enable_broker_on_linux, the Java and .NET
    /// brokers' clients) send their requests to whoever does.
    static func busName(_ context: DoctorContext) -> DoctorFinding {
        let id = "dbus.name", name = brokerBusName
        guard let asked = busDaemonCall("NameHasOwner", name) else {
            return .ok(id, "busctl is not installed: cannot see who owns \(name) (brokerd says: \(context.status?.dbusBroker ?? "nothing"))")
        }
        let frontEnd = context.status?.dbusBroker
        let frontEndOff = context.status != nil && frontEnd == nil
        guard asked.succeeded else {
            // A server without a session bus is fine: only apps that ask the D-Bus broker (MSAL's Linux broker) need one.
            return .ok(id, "no session bus here (\(asked.stderr.trimmingNewlines())): apps reach brokerd on its socket only; "
                       + "MSAL apps that use the D-Bus broker need a desktop session (or dbus-user-session)")
        }
        guard asked.stdout.contains("true") else {
            if frontEndOff { return .ok(id, "nobody owns \(name); brokerd's D-Bus front end is off (dbus_broker = false)") }
            let says = frontEnd.map { " (brokerd: \($0))" } ?? ""
            return .warning(id, "nobody owns \(name) on the session bus\(says): MSAL apps asking the D-Bus broker get no answer "
                            + "unless the bus can activate brokerd",
                            fix: context.status == nil ? "Start brokerd: \(DoctorContext.startHint)."
                                : "Restart brokerd so that it takes the name: systemctl --user restart \(DoctorContext.serviceUnit)")
        }
        let owner = busDaemonCall("GetConnectionUnixProcessID", name)
        let pid = owner.flatMap { $0.succeeded ? Int32(String($0.stdout.split(separator: " ").last ?? "").trimmingNewlines()) : nil }
        if let status = context.status, let pid, pid == status.pid {
            return .ok(id, "brokerd (pid \(pid)) owns \(name) on the session bus")
        }
        let who = pid.map(DoctorSystem.describeProcess) ?? "a process whose pid the bus does not tell"
        let notThis = context.status.map { "not this brokerd (pid \($0.pid))" } ?? "while brokerd does not run"
        if frontEndOff {
            return .ok(id, "\(who) owns \(name); brokerd's D-Bus front end is off (dbus_broker = false), so MSAL apps use that broker")
        }
        return .error(id, "\(who) owns \(name), \(notThis): MSAL apps that use the D-Bus broker talk to it"
                      + (frontEnd.map { " (brokerd: \($0))" } ?? ""),
                      fix: "Stop that broker (e.g. 'systemctl --user stop microsoft-identity-broker.service' and disable it), "
                        + "then restart brokerd: systemctl --user restart \(DoctorContext.serviceUnit). Or keep it and set "
                        + "dbus_broker = false in brokerd's config.")
    }

    // MARK: key store

    static func keyStore(_ context: DoctorContext, configuration: BrokerConfiguration?) -> DoctorFinding {
        let id = "keystore"
        guard let store = context.status?.keyStore else {
            let setting = configuration?.keyStore ?? .auto
            if setting == .file || setting == .memory {
                return .ok(id, "brokerd is configured with key_store = \"\(setting.rawValue)\"")
            }
            return secretServiceFinding(id, running: false, setting: setting)
        }
        let described = Format.keyStore(store)
        switch store.kind {
        case "secret-service":
            var finding = secretServiceFinding(id, running: true, setting: .secretService)
            if finding.status == .ok { finding.message = "key store: \(described); " + finding.message }
            return finding
        case "file":
            return keyFile(store.path, described: described)
        default:
            return .warning(id, "key store: \(described): the cache is lost when brokerd stops",
                            fix: "Unlock or install a Secret Service (gnome-keyring, KeePassXC), or set key_store = \"file\" "
                              + "in brokerd's config, then restart brokerd.")
        }
    }

    /// The default collection's `Locked` property. A running brokerd already holds its key, so a locked or missing
    /// Secret Service bites at its next start (a warning); a brokerd that is to start now cannot (an error). With
    /// key_store = auto, brokerd uses a key file when no Secret Service is on the bus, but refuses a locked one.
    private static func secretServiceFinding(_ id: String, running: Bool, setting: BrokerConfiguration.KeyStoreSetting) -> DoctorFinding {
        guard let asked = busctl(["get-property", "org.freedesktop.secrets", "/org/freedesktop/secrets/aliases/default",
                                  "org.freedesktop.Secret.Collection", "Locked"]) else {
            return .ok(id, "busctl is not installed: cannot ask the Secret Service whether it is locked")
        }
        let answer = asked.stdout.trimmingNewlines()
        if asked.succeeded && answer == "b false" { return .ok(id, "the Secret Service's default collection is unlocked") }
        let problem: (String, String?) -> DoctorFinding = { running ? .warning(id, $0, fix: $1) : .error(id, $0, fix: $1) }
        let stake = running ? "brokerd holds its cache key now, but cannot read it from there when it starts again"
            : "brokerd keeps its cache key there and cannot start (exit status 75)"
        if asked.succeeded && answer == "b true" {
            return problem("the Secret Service's default collection is locked: \(stake)",
                           "Unlock your keyring: log in to the desktop session (it unlocks the login keyring), or open "
                            + "\"Passwords and Keys\" (seahorse) and unlock it; then start brokerd again if it stopped.")
        }
        let why = asked.stderr.trimmingNewlines()
        if why.contains("not provided by any .service") || why.contains("ServiceUnknown") || why.contains("connect to bus") {
            let text = "no Secret Service on the session bus (\(why))"
            if !running && setting == .auto { return .ok(id, "\(text): brokerd (key_store = auto) keeps its key in a 0600 file") }
            return problem("\(text): \(stake)", "Start gnome-keyring (or KeePassXC's Secret Service) in your session, "
                           + "or move to key_store = \"file\" (brokerd then makes a new key: sign in again).")
        }
        return problem("the Secret Service has no default collection (\(why))",
                       "Create a default keyring in \"Passwords and Keys\" (seahorse), or set key_store = \"file\".")
    }

    private static func keyFile(_ path: String?, described: String) -> DoctorFinding {
        guard let path, let info = DoctorSystem.fileStatus(path) else {
            return .ok("keystore", "key store: \(described)")
        }
        let mode = info.st_mode & 0o7777
        if info.st_uid != getuid() || mode & 0o077 != 0 {
            return .error("keystore", "the key file \(path) is mode \(DoctorChecks.octal(mode)), uid \(info.st_uid): "
                          + "others may read the key of your tokens",
                          fix: "chmod 600 \(DoctorChecks.quoted(path)) (and make it yours)")
        }
        return .ok("keystore", "key store: \(described), mode \(DoctorChecks.octal(mode))")
    }
}
