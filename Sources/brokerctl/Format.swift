import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Human-readable output: what a user needs at a glance, aligned, times in local time with "in 42 min".
enum Format {
    static func now() -> Int64 { Int64(time(nil)) }

    static func status(_ s: StatusResult) -> String {
        var rows: [(String, String)] = []
        rows.append(("brokerd", "\(s.version) (protocol \(s.protocolVersion)), pid \(s.pid), up \(duration(s.uptimeSeconds))"))
        rows.append(("socket", s.socket + (s.socketActivated ? " (socket-activated)" : "")))
        rows.append(("config", (s.configPath ?? "") + (s.configPresent ? "" : " (not present: defaults in use)")))
        if let cache = s.cachePath {
            let written = s.lastWrite.map { "last written \(clock($0))" } ?? "not written yet"
            rows.append(("cache", "\(cache) (\(written))"))
        } else {
            rows.append(("cache", "in memory only"))
        }
        rows.append(("key store", keyStore(s.keyStore)))
        var accounts = "\(s.accounts)"
        if !s.signInRequired.isEmpty {
            accounts += " (\(s.signInRequired.count) need sign-in: \(s.signInRequired.joined(separator: ", ")))"
        }
        rows.append(("accounts", accounts))
        rows.append(("tokens", "\(s.refreshTokens) refresh, \(s.accessTokens) access, \(s.idTokens) id"))
        rows.append(("clients", "\(s.connections) connected, \(s.requestsServed) request(s) served"))
        if let dbus = s.dbusBroker { rows.append(("D-Bus", dbus)) }
        for waiting in s.pendingSignIns ?? [] { rows.append(("sign-in waiting", waitingSignIn(waiting, now: now()))) }
        for waiting in s.pendingConsents ?? [] { rows.append(("consent waiting", waitingConsent(waiting, now: now()))) }
        for file in s.waitingCaches ?? [] { rows.append(("cache waiting", "\(file) (for its key: brokerctl recover)")) }
        if let error = s.lastWriteError { rows.append(("WRITE ERROR", error)) }
        for problem in s.problems { rows.append(("PROBLEM", problem)) }
        return table(rows)
    }

    /// "secret-service (gnome-keyring on the session bus)", "file (/path): no Secret Service on the session bus".
    /// The reason is left out when the Secret Service was chosen automatically (the usual case on a desktop).
    static func keyStore(_ k: KeyStoreInfo) -> String {
        let location = k.location ?? k.path ?? "nothing on disk"
        let reason = k.reason.flatMap { $0.hasPrefix("chosen automatically") ? nil : $0 }
        return "\(k.kind) (\(location))" + (reason.map { ": \($0)" } ?? "")
    }

    static func accounts(_ accounts: [Account], now: Int64) -> String {
        if accounts.isEmpty { return "No accounts. Sign in with an app, or import a cache: brokerctl import FILE" }
        return accounts.map { account(in: $0, now: now) }.joined(separator: "\n\n")
    }

    static func account(in a: Account, now: Int64) -> String {
        var lines = ["\(a.username.isEmpty ? "(no username)" : a.username)  \(a.homeAccountId)"
            + (a.signInRequired ? "  [SIGN-IN REQUIRED]" : "")]
        var rows: [(String, String)] = [("environment", a.environment), ("home tenant", a.realm)]
        let others = a.tenantProfiles.map(\.realm).filter { $0.lowercased() != a.realm.lowercased() }
        if !others.isEmpty { rows.append(("other tenants", others.joined(separator: ", "))) }
        if a.apps.isEmpty { rows.append(("apps", "none hold tokens")) }
        for (index, app) in a.apps.enumerated() {
            var parts: [String] = []
            if app.hasRefreshToken { parts.append("refresh token" + (app.familyId.map { " (family \($0))" } ?? "")) }
            if !app.accessTokens.isEmpty {
                let next = app.accessTokens.compactMap(\.expiresOn).filter { $0 > now && $0 < now + 100 * 365 * 86_400 }.min()
                var text = "\(app.accessTokens.count) access token\(app.accessTokens.count == 1 ? "" : "s")"
                if let next { text += ", valid until \(clock(next)) (\(relative(next - now)))" } else { text += ", expired" }
                parts.append(text)
            }
            rows.append((index == 0 ? "apps" : "", "\(app.clientId): \(parts.joined(separator: "; "))"))
        }
        if !a.hiddenFrom.isEmpty { rows.append(("removed from", a.hiddenFrom.joined(separator: ", "))) }
        lines.append(table(rows, indent: "  "))
        return lines.joined(separator: "\n")
    }

    static func table(_ rows: [(String, String)], indent: String = "") -> String {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { indent + $0.0.padding(to: width) + "  " + $0.1 }.joined(separator: "\n")
    }

    static func duration(_ seconds: Int64) -> String {
        if seconds < 60 { return "\(seconds)s" }
        if seconds < 3600 { return "\(seconds / 60)m \(seconds % 60)s" }
        if seconds < 86400 { return "\(seconds / 3600)h \(seconds % 3600 / 60)m" }
        return "\(seconds / 86400)d \(seconds % 86400 / 3600)h"
    }

    static func relative(_ seconds: Int64) -> String {
        seconds < 120 ? "in \(seconds) s" : seconds < 7200 ? "in \(seconds / 60) min" : "in \(duration(seconds))"
    }

    /// Local date and time, `YYYY-MM-DD HH:MM`.
    static func clock(_ epoch: Int64) -> String {
        var seconds = time_t(epoch)
        var parts = tm()
        localtime_r(&seconds, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)):\(two(parts.tm_min))"
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}

/// "brokerctl: importing FILE… 3 s" on standard error while a long operation runs, when standard error is a
/// terminal and the operation takes over a second; the line is erased when it ends.
enum ProgressLine {
    static func `while`<T: Sendable>(_ what: String, _ body: () async throws -> T) async throws -> T {
        guard isatty(2) == 1 else { return try await body() }
        let ticker = Task {
            let started = ContinuousClock.now
            try await Task.sleep(for: .seconds(1))
            while !Task.isCancelled {
                let seconds = (ContinuousClock.now - started).components.seconds
                show("\rbrokerctl: \(what)… \(seconds) s ")
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        defer {
            ticker.cancel()
            show("\r\u{1B}[K")
        }
        return try await body()
    }

    private static func show(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
    }
}
