#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// brokerd's configuration file (TOML subset), default `$XDG_CONFIG_HOME/brokerd/config.toml`.
/// A missing file means all defaults; a file with a mistake is refused with the line and the reason.
public struct BrokerConfiguration: Sendable, Equatable {
    public enum KeyStoreSetting: String, Sendable, Equatable { case file, memory }

    /// Where the cache key lives: `file` (a 0600 key file beside the cache) or `memory` (nothing on disk).
    public var keyStore: KeyStoreSetting = .file
    /// Overrides the key file's path (default `<state dir>/cache.key`).
    public var keyFile: String?
    /// Accept connections from root when brokerd runs as another user (refused by default).
    public var allowRoot = false
    public var maxConnections = 256
    /// Seconds a connection may stay silent (with no request in flight) before it is closed.
    public var idleTimeoutSeconds = 300
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
    public var openBrowser = "auto"
    /// Seconds an interactive sign-in may take.
    public var interactiveTimeoutSeconds = 600
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
    /// Seconds between the background refresh's checks of the wall clock.
    public var refreshCheckIntervalSeconds = 60
    /// Renew a recently used access token this many seconds before it expires.
    public var renewAheadSeconds = 600
    /// Redeem a refresh token that was not used for this many days (Entra drops them after 90 idle days).
    public var keepAliveDays = 7
    /// Named profiles for `brokerctl token NAME` (used by the token engine).
    public var profiles: [String: Profile] = [:]

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
        for (name, table) in try TOMLSubset.parse(text) {
            if name.isEmpty {
                for entry in table.entries { try config.apply(entry.key, entry.value, line: entry.line) }
            } else if name.hasPrefix("profile.") {
                let profileName = String(name.dropFirst("profile.".count))
                config.profiles[profileName] = try Profile(table: table, name: profileName)
            } else {
                throw TOMLError(line: table.headerLine, message: "unknown table [\(name)]")
            }
        }
        return config
    }

    private mutating func apply(_ key: String, _ value: TOMLValue, line: Int) throws(TOMLError) {
        func int(_ range: ClosedRange<Int>) throws(TOMLError) -> Int {
            guard case .integer(let n) = value, range.contains(n) else {
                throw TOMLError(line: line, message: "'\(key)' must be an integer in \(range.lowerBound)...\(range.upperBound)")
            }
            return n
        }
        func strings() throws(TOMLError) -> [String] {
            guard case .array(let items) = value else { throw TOMLError(line: line, message: "'\(key)' must be an array of strings") }
            return try items.map { (item) throws(TOMLError) -> String in
                guard case .string(let s) = item else { throw TOMLError(line: line, message: "'\(key)' must be an array of strings") }
                return s
            }
        }
        func string() throws(TOMLError) -> String {
            guard case .string(let s) = value else { throw TOMLError(line: line, message: "'\(key)' must be a string") }
            return s
        }
        switch key {
        case "key_store":
            guard let setting = KeyStoreSetting(rawValue: try string()) else {
                throw TOMLError(line: line, message: "'key_store' must be \"file\" or \"memory\"")
            }
            keyStore = setting
        case "key_file": keyFile = try string()
        case "allow_root":
            guard case .bool(let b) = value else { throw TOMLError(line: line, message: "'allow_root' must be true or false") }
            allowRoot = b
        case "max_connections": maxConnections = try int(1...100_000)
        case "idle_timeout": idleTimeoutSeconds = try int(1...86_400)
        case "shutdown_grace": shutdownGraceSeconds = try int(0...300)
        case "write_delay_ms": writeDelayMilliseconds = try int(0...10_000)
        case "default_authority": defaultAuthority = try string()
        case "ca_file": caFile = try string()
        case "allow_loopback_http":
            guard case .bool(let b) = value else { throw TOMLError(line: line, message: "'allow_loopback_http' must be true or false") }
            allowLoopbackHTTP = b
        case "open_browser":
            let policy = try string()
            guard ["auto", "always", "never"].contains(policy) else {
                throw TOMLError(line: line, message: "'open_browser' must be \"auto\", \"always\" or \"never\"")
            }
            openBrowser = policy
        case "interactive_timeout": interactiveTimeoutSeconds = try int(10...3600)
        case "microsoft_base_url": microsoftBaseURL = try string()
        case "trusted_authority_hosts": trustedAuthorityHosts = try strings()
        case "b2c_hosts": b2cHosts = try strings()
        case "client_capabilities": clientCapabilities = try strings()
        case "background_refresh":
            guard case .bool(let b) = value else { throw TOMLError(line: line, message: "'background_refresh' must be true or false") }
            backgroundRefresh = b
        case "refresh_check_interval": refreshCheckIntervalSeconds = try int(1...3600)
        case "renew_ahead": renewAheadSeconds = try int(0...86_400)
        case "keepalive_days": keepAliveDays = try int(1...89)
        case "log_level":
            let level = try string()
            guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(level) else {
                throw TOMLError(line: line, message: "'log_level' must be one of trace, debug, info, notice, warning, error, critical")
            }
            logLevel = level
        default:
            throw TOMLError(line: line, message: "unknown setting '\(key)'")
        }
    }
}

extension BrokerConfiguration.Profile {
    init(table: TOMLTable, name: String) throws(TOMLError) {
        var clientId: String?, authority: String?, scopes: [String] = []
        for (key, value, line) in table.entries {
            switch (key, value) {
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
        guard let clientId else { throw TOMLError(line: table.headerLine, message: "profile '\(name)' needs client_id") }
        self.init(clientId: clientId, authority: authority, scopes: scopes)
    }
}
