import BrokerCore
import BrokerProtocol
import BrokerStore

/// The app methods (`getApps`, `setAppAccess`, `getAuditLog`): wire params → AppAccess, its records → wire.
extension RequestRouter {
    /// Whether the caller may see the accounts of `clientId`: once the policy lets it use the client ID. An app the
    /// policy would ask about sees none (a list is no reason to bother the user); one it refuses gets the refusal.
    func mayList(_ caller: CallerIdentity, clientId: String?) throws -> Bool {
        guard caller.app.isSandboxed || caller.failure != nil || apps.settings.unsandboxedApps != .allow
                || !apps.settings.pins.isEmpty else { return true }
        guard let clientId else { return !caller.app.isSandboxed && caller.failure == nil }
        switch apps.decide(caller, clientId: clientId, account: nil, scopes: []) {
        case .allow: return true
        case .ask: return false
        case .refuse(let refusal):
            apps.record(caller, frontEnd: "socket", clientId: clientId, scopes: [], homeAccountId: nil, username: nil,
                        outcome: "refused", detail: "\(refusal.reason.rawValue): \(refusal.message)")
            throw Self.rpcError(refusal)
        }
    }

    func appList() async throws -> AppsResult {
        let seen = try await apps.seenApps()
        let grants = await apps.grants()
        var byApp: [String: AppInfo] = [:]
        for row in seen {
            byApp[row.app] = AppInfo(app: row.app, kind: row.kind, executable: row.executable, unit: row.unit,
                                     firstSeen: row.firstSeen, lastSeen: row.lastSeen, clientIds: row.clientIds)
        }
        func entry(_ app: AppID) -> AppInfo {
            byApp[app.description] ?? AppInfo(app: app.description, kind: app.kind.rawValue,
                                               executable: app.kind == .exe ? app.name : nil)
        }
        for grant in grants {
            var info = entry(grant.app)
            info.grants.append(AppGrantInfo(clientId: grant.clientId, decision: grant.allowed ? "allow" : "deny",
                                            accounts: grant.accounts.isEmpty ? nil : grant.accounts,
                                            scopes: grant.scopes.isEmpty ? nil : grant.scopes, since: grant.since))
            byApp[grant.app.description] = info
        }
        for pin in apps.settings.pins {
            for app in pin.apps {
                var info = entry(app)
                info.grants.append(AppGrantInfo(clientId: pin.clientId, decision: "pinned"))
                byApp[app.description] = info
            }
        }
        return AppsResult(apps: byApp.keys.sorted().map { byApp[$0]! })
    }

    func setAppAccess(_ p: SetAppAccessParams) async throws -> SetAppAccessResult {
        guard let app = AppID(parsing: p.app) else {
            throw RPCError.invalidParams("'app' must be flatpak:ID, snap:NAME or exe:/PATH, not '\(p.app)'", reason: "invalidApp")
        }
        if p.decision == "revoke" {
            let revoked = try await apps.revoke(app, clientId: p.clientId)
            return SetAppAccessResult(app: p.app, clientId: p.clientId, decision: p.decision, answeredRequests: 0, revoked: revoked)
        }
        guard let answer = ConsentAnswer(rawValue: p.decision) else {
            throw RPCError.invalidParams("'decision' must be allow, allowOnce, deny or revoke", reason: "invalidDecision")
        }
        guard let clientId = p.clientId, !clientId.isEmpty else {
            throw RPCError.invalidParams("'clientId' is required for \(p.decision)", reason: "missingClientId")
        }
        if answer != .allow, (p.accounts ?? []).count + (p.scopes ?? []).count > 0 {
            throw RPCError.invalidParams("'accounts' and 'scopes' limit a grant: they go with allow only", reason: "invalidDecision")
        }
        let answered = try await apps.answer(app, clientId: clientId, with: answer, accounts: p.accounts ?? [], scopes: p.scopes ?? [])
        return SetAppAccessResult(app: p.app, clientId: clientId, decision: p.decision, answeredRequests: answered)
    }

    static let auditLimit = 100_000

    func auditLog(_ p: GetAuditLogParams) async throws -> AuditLogResult {
        let limit = p.limit ?? 100
        guard (1...Self.auditLimit).contains(limit) else {
            throw RPCError.invalidParams("'limit' must be in 1...\(Self.auditLimit)", reason: "invalidLimit")
        }
        if let app = p.app, AppID(parsing: app) == nil {
            throw RPCError.invalidParams("'app' must be flatpak:ID, snap:NAME or exe:/PATH, not '\(app)'", reason: "invalidApp")
        }
        let rows = try await apps.audit(AuditFilter(app: p.app, clientId: p.clientId, account: p.account, since: p.since, limit: limit))
        return AuditLogResult(entries: rows.map(Self.wire))
    }

    static func wire(_ row: AuditRow) -> AuditEntry {
        AuditEntry(time: row.time, lastTime: row.lastTime, count: row.count, frontEnd: row.frontEnd, app: row.app, pid: row.pid,
                   executable: row.executable, clientId: row.clientId, scopes: row.scopes.split(separator: " ").map(String.init),
                   homeAccountId: row.homeAccountId, username: row.username, outcome: row.outcome, detail: row.detail)
    }

    static func wire(_ consent: PendingConsent) -> PendingConsentInfo {
        PendingConsentInfo(consentId: consent.consentId, app: consent.app.description, executable: consent.executable,
                           clientId: consent.clientId, frontEnd: consent.frontEnd, since: consent.since,
                           expiresOn: consent.expiresOn, waiting: consent.waiting)
    }
}
