import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `brokerctl apps`: which app asks for which client ID, and the user's answers.
struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "List the apps brokerd has seen, their client IDs and grants; allow, deny or revoke an app's access.",
        discussion: """
            An app is named as brokerd names it: flatpak:ID (a Flatpak), snap:NAME (a confined snap) or exe:PATH (any \
            other process). Revoking deletes no token: the tokens belong to the account, brokerd stops handing them to \
            that app.
            """,
        subcommands: [AppsList.self, AppsAllow.self, AppsDeny.self, AppsRevoke.self],
        defaultSubcommand: AppsList.self)
}

struct AppsList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List every app seen, with its grants.")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let apps = try await withBroker { try await connection.control().apps() }
        if output.json { return try printJSON(AppsResult(apps: apps)) }
        print(Format.apps(apps))
    }
}

struct AppsAllow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "allow",
        abstract: "Let an app use a client ID's tokens: answers its waiting request, or grants ahead of time.")
    @Argument(help: "The app: flatpak:ID, snap:NAME or exe:PATH.") var app: String
    @Option(name: .customLong("client-id"), help: "The client ID (app registration) to grant.") var clientId: String
    @Flag(help: "Only the requests waiting now; the next one asks again.") var once = false
    @Option(name: .customLong("account"), help: "Limit the grant to this account (repeatable; home account ID or username).")
    var accounts: [String] = []
    @Option(name: .customLong("scope"), help: "Limit the grant to scopes matching this pattern (repeatable; * matches anything).")
    var scopes: [String] = []
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if once, !(accounts.isEmpty && scopes.isEmpty) { throw ValidationError("--once answers the waiting requests only: no --account or --scope") }
    }

    func run() async throws {
        let params = SetAppAccessParams(app: app, clientId: clientId, decision: once ? "allowOnce" : "allow",
                                        accounts: accounts.isEmpty ? nil : accounts, scopes: scopes.isEmpty ? nil : scopes)
        let result = try await withBroker { try await connection.control().setAppAccess(params) }
        if output.json { return try printJSON(result) }
        print((once ? "Allowed \(app) client ID \(clientId) once" : "Granted \(app) client ID \(clientId)")
              + (accounts.isEmpty ? "" : " for \(accounts.joined(separator: ", "))")
              + (scopes.isEmpty ? "" : " (scopes \(scopes.joined(separator: " ")))")
              + Format.answered(result.answeredRequests))
    }
}

struct AppsDeny: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deny", abstract: "Refuse an app a client ID, until revoked (its waiting requests are refused too).")
    @Argument(help: "The app: flatpak:ID, snap:NAME or exe:PATH.") var app: String
    @Option(name: .customLong("client-id"), help: "The client ID to refuse.") var clientId: String
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let result = try await withBroker {
            try await connection.control().setAppAccess(SetAppAccessParams(app: app, clientId: clientId, decision: "deny"))
        }
        if output.json { return try printJSON(result) }
        print("Denied \(app) client ID \(clientId)" + Format.answered(result.answeredRequests))
    }
}

struct AppsRevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Forget an app's grants and denials (one client ID, or all); its tokens stay.")
    @Argument(help: "The app: flatpak:ID, snap:NAME or exe:PATH.") var app: String
    @Option(name: .customLong("client-id"), help: "Only this client ID.") var clientId: String?
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let result = try await withBroker {
            try await connection.control().setAppAccess(SetAppAccessParams(app: app, clientId: clientId, decision: "revoke"))
        }
        if output.json { return try printJSON(result) }
        let count = result.revoked ?? 0
        print("Revoked \(count) grant\(count == 1 ? "" : "s") or denial\(count == 1 ? "" : "s") of \(app)"
              + (clientId.map { " for client ID \($0)" } ?? ""))
    }
}

/// `brokerctl log`: the audit of tokens handed out, refused or failed.
struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Show who got which token: every token handed out, refused or failed, newest first (never a token).",
        discussion: "Repeated cache hits of one app are one row with their count.")
    @Option(help: "Only this app (flatpak:ID, snap:NAME or exe:PATH).") var app: String?
    @Option(name: .customLong("client-id"), help: "Only this client ID.") var clientId: String?
    @Option(help: "Only this account (home account ID or username).") var account: String?
    @Option(help: ArgumentHelp("Only calls since then: Unix seconds, or an age such as 30m, 12h, 7d.", valueName: "time"))
    var since: String?
    @Option(help: "At most this many rows (newest first).") var limit = 100
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let since, Format.sinceTime(since, now: Format.now()) == nil {
            throw ValidationError("--since takes Unix seconds or an age such as 30s, 30m, 12h, 7d; not '\(since)'")
        }
    }

    func run() async throws {
        let params = GetAuditLogParams(app: app, clientId: clientId, account: account,
                                       since: since.flatMap { Format.sinceTime($0, now: Format.now()) }, limit: limit)
        let entries = try await withBroker { try await connection.control().auditLog(params) }
        if output.json { return try printJSON(AuditLogResult(entries: entries)) }
        print(Format.audit(entries))
    }
}

extension Format {
    static func answered(_ count: Int) -> String {
        count == 0 ? "." : "; \(count) waiting request\(count == 1 ? "" : "s") answered."
    }

    static func apps(_ apps: [AppInfo]) -> String {
        guard !apps.isEmpty else { return "No app has asked brokerd for a token yet." }
        var lines: [String] = []
        for app in apps {
            lines.append(app.app)
            var rows: [(String, String)] = []
            if let executable = app.executable, app.kind != "exe" { rows.append(("executable", executable)) }
            if let unit = app.unit { rows.append(("unit", unit)) }
            if let first = app.firstSeen, let last = app.lastSeen {
                rows.append(("seen", "\(dateTime(first)) to \(dateTime(last))"))
            }
            if !app.clientIds.isEmpty { rows.append(("client IDs", app.clientIds.joined(separator: ", "))) }
            for grant in app.grants {
                var text = grant.decision + (grant.since.map { " since \(dateTime($0))" } ?? " (configuration)")
                if let accounts = grant.accounts { text += "; accounts \(accounts.joined(separator: ", "))" }
                if let scopes = grant.scopes { text += "; scopes \(scopes.joined(separator: " "))" }
                rows.append(("  \(grant.clientId)", text))
            }
            lines.append(table(rows, indent: "  "))
        }
        return lines.joined(separator: "\n")
    }

    static func audit(_ entries: [AuditEntry]) -> String {
        guard !entries.isEmpty else { return "No audit rows match." }
        return entries.map { e in
            var line = dateTime(e.lastTime) + "  " + e.frontEnd + "  " + e.app + " (pid \(e.pid))  " + e.clientId + "  "
                + (e.username ?? e.homeAccountId ?? "-") + "  " + e.scopes.joined(separator: " ") + "  " + e.outcome
            if e.count > 1 { line += " ×\(e.count) since \(dateTime(e.time))" }
            if let detail = e.detail { line += "  (\(detail))" }
            return line
        }.joined(separator: "\n")
    }

    /// Unix seconds, or an age (`30s`, `30m`, `12h`, `7d`) before `now`.
    static func sinceTime(_ text: String, now: Int64) -> Int64? {
        if let seconds = Int64(text), seconds >= 0 { return seconds }
        guard let unit = text.last, let count = Int64(text.dropLast()), count >= 0 else { return nil }
        let scale: Int64
        switch unit {
        case "s": scale = 1
        case "m": scale = 60
        case "h": scale = 3_600
        case "d": scale = 86_400
        default: return nil
        }
        return now - count * scale
    }

    /// Local `YYYY-MM-DD HH:MM:SS`.
    static func dateTime(_ epoch: Int64) -> String {
        let parts = localTime(epoch)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) " + timeOfDay(epoch)
    }
}
