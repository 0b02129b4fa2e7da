#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// brokerd's configuration file (TOML 1.0.0), default `$XDG_CONFIG_HOME/brokerd/config.toml`.
/// A missing file means all defaults; a file with a mistake is refused with the line and the reason.
public struct BrokerConfiguration: Sendable, Equatable {
    public enum KeyStoreSetting: String, Sendable, Equatable, CaseIterable {
        case auto
        case secretService = "secret-service"
        case file, memory
    }

    /// Where the cache key lives: `auto` (the Secret Service when one is on the session bus, else `file`),
    /// `secret-service`, `file` (a 0600 key file beside the cache) or `memory` (nothing on disk).
    public var keyStore: KeyStoreSetting = .auto
    /// Overrides the key file's path (default `<state dir>/cache.key`).
    public var keyFile: String?
    /// Accept connections from root when brokerd runs as another user (refused by default).
    public var allowRoot = false
    public var maxConnections = 256
    /// Connections one client process may hold; past it (or `maxConnections`) its longest-idle one is closed.
    public var maxConnectionsPerProcess = 64
    /// Seconds a connection may stay silent (with no request in flight) before it is closed.
    public var idleTimeoutSeconds = 300
    /// Requests one connection may have running (each batch member counts) before brokerd stops reading from it.
    public var maxRequestsInFlight = 64
    /// Members a JSON-RPC batch may have.
    public var maxBatchSize = 100
    /// Seconds a client has to finish a request line it has begun.
    public var lineTimeoutSeconds = 10
    /// Seconds in-flight requests get to finish on SIGTERM.
    public var shutdownGraceSeconds = 5
    /// Extra wait before a cache write, to coalesce bursts; changes made during a write share the next one anyway.
    public var writeDelayMilliseconds = 0
    public var logLevel: String?
    /// Authority for requests that name none and whose client has no profile with one.
    public var defaultAuthority: String?
    /// PEM bundle of CA certificates trusted for HTTPS to identity providers (instead of the system store).
    public var caFile: String?
    /// Allow plain `http://` to 127.0.0.1 / localhost identity providers (local test servers only).
    public var allowLoopbackHTTP = false
    /// Start a browser for interactive sign-in: `auto` (when a display is present), `always` or `never`.
    public var openBrowser = OpenBrowser.auto

    /// The values of `open_browser` (BrokerCore's BrowserPolicy has the same cases; this module knows only the file).
    public enum OpenBrowser: String, Sendable, CaseIterable {
        case auto, always, never
    }
    /// Seconds an interactive sign-in may take.
    public var interactiveTimeoutSeconds = 600
    /// Seconds one request to an identity provider may take, from connecting to the last byte of the answer.
    public var requestTimeoutSeconds = 30
    /// Seconds to wait for a connection to an identity provider (name resolution included).
    public var connectTimeoutSeconds = 3
    /// Requests to the Microsoft identity platform's hosts go to this base URL instead (tests: the Entra emulator).
    public var microsoftBaseURL: String?
    /// Hosts trusted as Entra authorities besides Microsoft's own (authority validation).
    public var trustedAuthorityHosts: [String] = []
    /// Custom domains that serve Azure AD B2C.
    public var b2cHosts: [String] = []
    /// Client capabilities sent to the IdP in `claims` (xms_cc), e.g. ["cp1"] for continuous access evaluation.
    public var clientCapabilities: [String] = []
    /// Renew recently used access tokens before they expire, and keep idle refresh tokens alive.
    public var backgroundRefresh = true
    /// Serve com.microsoft.identity.broker1 on the D-Bus session bus, whenever one is reachable.
    public var dbusBroker = true
    /// How D-Bus callers sign in: `auto` (the browser when brokerd can start one, else a device code), `browser` or
    /// `device-code`.
    public var dbusSignIn = "auto"
    /// Milliseconds between the background refresh's checks of the wall clock. Set in seconds; a fraction of one is
    /// for tests, which then see a check come and go in a fraction of a second.
    public var refreshCheckIntervalMilliseconds = 60_000
    /// Renew a recently used access token this many seconds before it expires.
    public var renewAheadSeconds = 600
    /// Redeem a refresh token that was not used for this many days (Entra drops them after 90 idle days).
    public var keepAliveDays = 7
    /// Seconds before the first retry of a failed background refresh (doubling, up to an hour).
    public var refreshBackoffSeconds = 60
    /// Named profiles for `brokerctl token NAME` (used by the token engine).
    public var profiles: [String: Profile] = [:]
    /// Flatpak and snap apps: `ask` (the user grants each client ID on first use) or `deny` (only what was granted
    /// ahead of time or pinned).
    public var sandboxedApps = "ask"
    /// Other processes of the user: `allow` (on the record), `ask` (each executable with each client ID, once) or
    /// `pinned` (only `[[pin]]` and grants).
    public var unsandboxedApps = "allow"
    /// Seconds a request waits for the user's consent before it is refused.
    public var consentTimeoutSeconds = 120
    /// Audit rows older than this many days are deleted.
    public var auditRetentionDays = 90
    /// The audit keeps at most this many rows (the oldest go first).
    public var auditMaxRows = 1_000_000
    /// `[[pin]]`: a client ID's tokens go to these apps only.
    public var pins: [Pin] = []
    /// `[hooks]`: commands brokerd runs on broker events.
    public var hooks = Hooks()

    /// `[hooks]`: one shell command per event (`sign_in_required = "notify-send …"`) and `timeout`.
    public struct Hooks: Sendable, Equatable {
        public enum Event: String, Sendable, Equatable, CaseIterable {
            case signInRequired = "sign_in_required"
            case signInPending = "sign_in_pending"
            case tokenRefreshed = "token_refreshed"
            case refreshFailed = "refresh_failed"
        }

        /// The command of each event that has one, run as `/bin/sh -c COMMAND`.
        public var commands: [Event: String] = [:]
        /// Seconds a hook may run before its process group is killed.
        public var timeoutSeconds = 10

        public init(commands: [Event: String] = [:], timeoutSeconds: Int = 10) {
            self.commands = commands
            self.timeoutSeconds = timeoutSeconds
        }
    }

    /// `[[pin]] client_id = "…"` with `executables`, `flatpaks` and/or `snaps`, or `apps` in printable form
    /// (`exe:/usr/bin/az`, `flatpak:org.example.App`, `snap:name`).
    public struct Pin: Sendable, Equatable {
        public var clientId: String
        /// Printable app names: `exe:PATH`, `flatpak:ID`, `snap:NAME`.
        public var apps: [String]

        public init(clientId: String, apps: [String]) {
            self.clientId = clientId
            self.apps = apps
        }
    }

    public struct Profile: Sendable, Equatable {
        public var clientId: String
        public var authority: String?
        public var scopes: [String]
    }

    public init() {}

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var path: String
        public var message: String
        public var description: String { "\(path): \(message)" }
    }

    public static func defaultPath() -> String {
        "\(xdgDirectory("XDG_CONFIG_HOME", fallback: ".config"))/brokerd/config.toml"
    }

    /// `$STATE_DIRECTORY` (systemd StateDirectory=), else `$XDG_STATE_HOME/brokerd`, else `~/.local/state/brokerd`.
    public static func defaultStateDirectory() -> String {
        if let fromSystemd = getenv("STATE_DIRECTORY").map({ String(cString: $0) }), fromSystemd.hasPrefix("/") {
            return String(fromSystemd.split(separator: ":").first ?? Substring(fromSystemd))
        }
        return "\(xdgDirectory("XDG_STATE_HOME", fallback: ".local/state"))/brokerd"
    }

    static func xdgDirectory(_ variable: String, fallback: String) -> String {
        if let value = getenv(variable).map({ String(cString: $0) }), value.hasPrefix("/") { return value }
        let home = getenv("HOME").map { String(cString: $0) } ?? getpwuid(getuid()).map { String(cString: $0.pointee.pw_dir) } ?? "/"
        return "\(home)/\(fallback)"
    }

    /// Reads the file at `path`; a missing file gives the defaults unless `required`.
    public static func load(path: String, required: Bool = false) throws(Failure) -> BrokerConfiguration {
        guard let file = fopen(path, "r") else {
            if errno == ENOENT && !required { return BrokerConfiguration() }
            throw Failure(path: path, message: String(cString: strerror(errno)))
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n == 0 { break }
            bytes.append(contentsOf: buffer[0..<n])
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw Failure(path: path, message: "not valid UTF-8")
        }
        do { return try parse(text) } catch { throw Failure(path: path, message: error.description) }
    }

    public static func parse(_ text: String) throws(TOMLError) -> BrokerConfiguration {
        var config = BrokerConfiguration()
        for entry in try TOML.parse(text).entries {
            if entry.key == "pin" {
                config.pins += try Pin.list(entry)
                continue
            }
            if entry.key == "hooks" {
                config.hooks = try Hooks(entry)
                continue
            }
            guard entry.key == "profile" else {
                try config.apply(entry)
                continue
            }
            // `[profile.NAME]`, `profile.NAME.client_id = …` and `[profile]` + `NAME = { … }` all land here.
            guard case .table(let profiles) = entry.value else {
                throw TOMLError(line: entry.line, message: "'profile' must be a table of profiles ([profile.NAME])")
            }
            for profile in profiles.entries {
                guard case .table(let table) = profile.value else {
                    throw TOMLError(line: profile.line, message: "'\(profile.key)' in [profile] is not a profile: "
                                    + "a profile's settings go in [profile.NAME]")
                }
                config.profiles[profile.key] = try Profile(table: table, name: profile.key)
            }
        }
        return config
    }

    /// Names an unknown key the way it was written: `[server.tls]` for a header (whose parents are implicit),
    /// `server.port` for a dotted key.
    private static func unknown(_ entry: TOMLTable.Entry) -> TOMLError {
        var parts = [entry.key]
        var value = entry.value
        while case .table(let table) = value, table.origin == .implicit || table.origin == .dottedKeys,
              let first = table.entries.first {
            parts.append(first.key)
            value = first.value
        }
        let name = TOML.dottedKey(parts)
        switch value {
        case .table(let table) where table.origin == .header:
            return TOMLError(line: entry.line, message: "unknown table [\(name)]")
        case .array(let items) where items.first.map(isHeaderTable) == true:
            return TOMLError(line: entry.line, message: "unknown table [[\(name)]]")
        default:
            return TOMLError(line: entry.line, message: "unknown setting '\(name)'")
        }
    }

    private static func isHeaderTable(_ value: TOMLValue) -> Bool {
        if case .table(let table) = value { return table.origin == .header }
        return false
    }

    private mutating func apply(_ entry: TOMLTable.Entry) throws(TOMLError) {
        switch entry.key {
        case "key_store":
            guard let setting = KeyStoreSetting(rawValue: try entry.string()) else {
                throw TOMLError(line: entry.line, message: "'key_store' must be \"auto\", \"secret-service\", \"file\" or \"memory\"")
            }
            keyStore = setting
        case "key_file": keyFile = try entry.string()
        case "allow_root": allowRoot = try entry.bool()
        case "max_connections": maxConnections = try entry.int(1...100_000)
        case "idle_timeout": idleTimeoutSeconds = try entry.int(1...86_400)
        case "max_connections_per_process": maxConnectionsPerProcess = try entry.int(1...100_000)
        case "max_requests_in_flight": maxRequestsInFlight = try entry.int(1...10_000)
        case "max_batch_size": maxBatchSize = try entry.int(1...10_000)
        case "line_timeout": lineTimeoutSeconds = try entry.int(1...3600)
        case "shutdown_grace": shutdownGraceSeconds = try entry.int(0...300)
        case "write_delay_ms": writeDelayMilliseconds = try entry.int(0...10_000)
        case "default_authority": defaultAuthority = try entry.string()
        case "ca_file": caFile = try entry.string()
        case "allow_loopback_http": allowLoopbackHTTP = try entry.bool()
        case "open_browser":
            openBrowser = OpenBrowser(rawValue: try entry.string(
                oneOf: OpenBrowser.allCases.map(\.rawValue), else: "'open_browser' must be \"auto\", \"always\" or \"never\"")) ?? .auto
        case "interactive_timeout": interactiveTimeoutSeconds = try entry.int(3...3600)
        case "request_timeout": requestTimeoutSeconds = try entry.int(1...300)
        case "connect_timeout": connectTimeoutSeconds = try entry.int(1...60)
        case "microsoft_base_url": microsoftBaseURL = try entry.string()
        case "trusted_authority_hosts": trustedAuthorityHosts = try entry.strings()
        case "b2c_hosts": b2cHosts = try entry.strings()
        case "client_capabilities": clientCapabilities = try entry.strings()
        case "background_refresh": backgroundRefresh = try entry.bool()
        case "dbus_broker": dbusBroker = try entry.bool()
        case "dbus_sign_in":
            dbusSignIn = try entry.string(oneOf: ["auto", "browser", "device-code"],
                                          else: "'dbus_sign_in' must be \"auto\", \"browser\" or \"device-code\"")
        case "refresh_check_interval": refreshCheckIntervalMilliseconds = try entry.milliseconds(0.1...3600)
        case "renew_ahead": renewAheadSeconds = try entry.int(0...86_400)
        case "keepalive_days": keepAliveDays = try entry.int(1...89)
        case "refresh_backoff": refreshBackoffSeconds = try entry.int(1...3600)
        case "sandboxed_apps":
            sandboxedApps = try entry.string(oneOf: ["ask", "deny"], else: "'sandboxed_apps' must be \"ask\" or \"deny\"")
        case "unsandboxed_apps":
            unsandboxedApps = try entry.string(oneOf: ["allow", "ask", "pinned"],
                                               else: "'unsandboxed_apps' must be \"allow\", \"ask\" or \"pinned\"")
        case "consent_timeout": consentTimeoutSeconds = try entry.int(5...280)
        case "audit_retention_days": auditRetentionDays = try entry.int(1...3650)
        case "audit_max_rows": auditMaxRows = try entry.int(1_000...100_000_000)
        case "log_level":
            logLevel = try entry.string(
                oneOf: ["trace", "debug", "info", "notice", "warning", "error", "critical"],
                else: "'log_level' must be one of trace, debug, info, notice, warning, error, critical")
        default:
            throw Self.unknown(entry)
        }
    }
}

/// A setting's value of the expected type, or an error naming the setting's line.
private extension TOMLTable.Entry {
    func int(_ range: ClosedRange<Int>) throws(TOMLError) -> Int {
        guard case .integer(let n) = value, let n = Int(exactly: n), range.contains(n) else {
            throw TOMLError(line: line, message: "'\(key)' must be an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return n
    }

    /// Seconds, an integer or a float, as whole milliseconds.
    func milliseconds(_ range: ClosedRange<Double>) throws(TOMLError) -> Int {
        let seconds: Double
        switch value {
        case .integer(let n): seconds = Double(n)
        case .float(let x): seconds = x
        default: seconds = .nan
        }
        guard range.contains(seconds) else {
            func text(_ x: Double) -> String { x == x.rounded() ? "\(Int(x))" : "\(x)" }
            throw TOMLError(line: line, message: "'\(key)' must be a number of seconds in \(text(range.lowerBound))...\(text(range.upperBound))")
        }
        return Int((seconds * 1000).rounded())
    }

    func bool() throws(TOMLError) -> Bool {
        guard case .bool(let b) = value else { throw TOMLError(line: line, message: "'\(key)' must be true or false") }
        return b
    }

    func string() throws(TOMLError) -> String {
        guard case .string(let s) = value else { throw TOMLError(line: line, message: "'\(key)' must be a string") }
        return s
    }

    func string(oneOf allowed: [String], else message: String) throws(TOMLError) -> String {
        let s = try string()
        guard allowed.contains(s) else { throw TOMLError(line: line, message: message) }
        return s
    }

    func strings() throws(TOMLError) -> [String] {
        guard case .array(let items) = value else { throw TOMLError(line: line, message: "'\(key)' must be an array of strings") }
        return try items.map { (item) throws(TOMLError) -> String in
            guard case .string(let s) = item else { throw TOMLError(line: line, message: "'\(key)' must be an array of strings") }
            return s
        }
    }
}

extension BrokerConfiguration.Profile {
    init(table: TOMLTable, name: String) throws(TOMLError) {
        var clientId: String?, authority: String?, scopes: [String] = []
        for entry in table.entries {
            let (key, line) = (entry.key, entry.line)
            switch (key, entry.value) {
            case ("client_id", .string(let s)): clientId = s
            case ("authority", .string(let s)): authority = s
            case ("scopes", .array(let items)):
                scopes = try items.map { (item) throws(TOMLError) -> String in
                    guard case .string(let s) = item else { throw TOMLError(line: line, message: "'scopes' must be strings") }
                    return s
                }
            default:
                throw TOMLError(line: line, message: "profile '\(name)': unknown or mistyped setting '\(key)'")
            }
        }
        guard let clientId else { throw TOMLError(line: table.line, message: "profile '\(name)' needs client_id") }
        self.init(clientId: clientId, authority: authority, scopes: scopes)
    }
}

extension BrokerConfiguration.Hooks {
    /// The `[hooks]` table (or `hooks.KEY = …` dotted keys).
    init(_ entry: TOMLTable.Entry) throws(TOMLError) {
        guard case .table(let table) = entry.value else {
            throw TOMLError(line: entry.line, message: "'hooks' must be a table ([hooks])")
        }
        self.init()
        for setting in table.entries {
            if setting.key == "timeout" {
                timeoutSeconds = try setting.int(1...300)
                continue
            }
            guard let event = Event(rawValue: setting.key) else {
                let known = (Event.allCases.map(\.rawValue) + ["timeout"]).joined(separator: ", ")
                throw TOMLError(line: setting.line, message: "[hooks]: unknown setting '\(setting.key)' (\(known))")
            }
            guard case .string(let command) = setting.value,
                  command.contains(where: { !$0.isWhitespace }), !command.contains(Character("\0")) else {
                throw TOMLError(line: setting.line, message: "[hooks] \(setting.key) must be a non-empty shell command (a string)")
            }
            commands[event] = command
        }
    }
}

extension BrokerConfiguration.Pin {
    /// Every `[[pin]]` table of the file.
    static func list(_ entry: TOMLTable.Entry) throws(TOMLError) -> [Self] {
        guard case .array(let items) = entry.value else {
            throw TOMLError(line: entry.line, message: "'pin' must be an array of tables ([[pin]])")
        }
        return try items.map { (item) throws(TOMLError) -> Self in
            guard case .table(let table) = item else { throw TOMLError(line: entry.line, message: "'pin' must be an array of tables ([[pin]])") }
            return try Self(table: table)
        }
    }

    init(table: TOMLTable) throws(TOMLError) {
        var clientId: String?, apps: [String] = []
        for entry in table.entries {
            let line = entry.line
            guard entry.key != "client_id" else {
                guard case .string(let s) = entry.value, !s.isEmpty else {
                    throw TOMLError(line: line, message: "[[pin]] client_id must be a non-empty string")
                }
                clientId = s
                continue
            }
            let prefix: String
            switch entry.key {
            case "executables": prefix = "exe:"
            case "flatpaks": prefix = "flatpak:"
            case "snaps": prefix = "snap:"
            case "apps": prefix = ""
            default: throw TOMLError(line: line, message: "[[pin]]: unknown setting '\(entry.key)' "
                                     + "(client_id, executables, flatpaks, snaps, apps)")
            }
            guard case .array(let values) = entry.value else {
                throw TOMLError(line: line, message: "[[pin]] \(entry.key) must be an array of strings")
            }
            for value in values {
                guard case .string(let name) = value, !name.isEmpty else {
                    throw TOMLError(line: line, message: "[[pin]] \(entry.key) must be an array of non-empty strings")
                }
                let app = prefix + name
                guard Self.isPrintableApp(app) else {
                    throw TOMLError(line: line, message: "[[pin]] '\(name)' is not an app: an absolute executable path, "
                                    + "or exe:PATH, flatpak:ID, snap:NAME in 'apps'")
                }
                apps.append(app)
            }
        }
        guard let clientId else { throw TOMLError(line: table.line, message: "[[pin]] needs client_id") }
        guard !apps.isEmpty else {
            throw TOMLError(line: table.line, message: "[[pin]] for \(clientId) names no app (executables, flatpaks, snaps or apps)")
        }
        self.init(clientId: clientId, apps: apps)
    }

    /// `exe:/absolute/path`, `flatpak:ID` or `snap:NAME`.
    static func isPrintableApp(_ text: String) -> Bool {
        if text.hasPrefix("exe:") { return text.dropFirst(4).hasPrefix("/") }
        if text.hasPrefix("flatpak:") { return text.count > 8 }
        if text.hasPrefix("snap:") { return text.count > 5 }
        return false
    }
}
