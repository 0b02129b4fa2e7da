@testable import BrokerCore
import BrokerStore
import Logging
import XCTest

/// The identity and policy rules on their own (the real sandboxes are in BrokerIntegrationTests/AppIdentityTests).
final class AppIdentityRulesTests: XCTestCase {
    private let info = Array("[Application]\nname=org.example.Mail\n\n[Instance]\ninstance-id=42\n".utf8)

    private func identity(root: CallerIdentity.Root, label: String? = nil, executable: String = "/usr/bin/mail") -> CallerIdentity {
        CallerIdentity.classify(uid: 1000, pid: 4242, pinnedBy: "pidfd_open", executable: executable,
                                cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.example.Mail-7.scope\n",
                                securityLabel: label, root: root)
    }

    func testFlatpakOnlyThroughARootOtherThanBrokerds() {
        XCTAssertEqual(identity(root: .flatpakInfo(info)).app.description, "flatpak:org.example.Mail")
        XCTAssertEqual(identity(root: .flatpakInfo(info)).unit, "app-flatpak-org.example.Mail-7.scope")
        XCTAssertEqual(identity(root: .noFlatpakInfo).app.description, "exe:/usr/bin/mail")
        XCTAssertEqual(identity(root: .brokersOwn).app.description, "exe:/usr/bin/mail")
    }

    func testABrokenFlatpakInfoIsAFailureNeverAHostProcess() {
        for broken in ["[Application]\nname=org.example.Mail\n", "[Application]\nname=mail\n\n[Instance]\ninstance-id=1\n",
                       "no group\n", "[Application]\nname=org.example.Mail\n[Application]\n[Instance]\ninstance-id=1\n"] {
            let caller = identity(root: .flatpakInfo(Array(broken.utf8)))
            XCTAssertNotNil(caller.failure, broken)
            XCTAssertEqual(caller.app.kind, .unknown, broken)
        }
        XCTAssertNotNil(identity(root: .flatpakInfo([0xff, 0xfe])).failure)
    }

    func testAFlatpakThatCanReachTheHostCountsAsAHostProcess() {
        let bus = Array("[Application]\nname=org.example.Mail\n[Instance]\ninstance-id=1\n[Context]\nsockets=x11;session-bus;\n".utf8)
        XCTAssertEqual(identity(root: .flatpakInfo(bus)).app.kind, .exe)
        XCTAssertEqual(identity(root: .flatpakInfo(bus)).notes.count, 1)
        let spawn = Array("[Application]\nname=org.example.Mail\n[Instance]\ninstance-id=1\n[Session Bus Policy]\norg.freedesktop.Flatpak=talk\n".utf8)
        XCTAssertEqual(identity(root: .flatpakInfo(spawn)).app.kind, .exe)
    }

    func testSnapsOnlyInEnforceMode() {
        XCTAssertEqual(identity(root: .noFlatpakInfo, label: "snap.firefox.firefox (enforce)").app.description, "snap:firefox")
        XCTAssertEqual(identity(root: .noFlatpakInfo, label: "snap.foo.hook.configure (enforce)").app.description, "snap:foo")
        XCTAssertEqual(identity(root: .noFlatpakInfo, label: "snap.foo.foo (complain)").app.kind, .exe)
        XCTAssertEqual(identity(root: .noFlatpakInfo, label: "unconfined").app.kind, .exe)
        XCTAssertEqual(identity(root: .noFlatpakInfo, label: "/usr/bin/man (enforce)").app.kind, .exe)
        XCTAssertNil(SnapLabel("snap..x (enforce)"))
    }

    func testAConfinedSnapThatShowsAFlatpakInfoIsNeither() {
        let caller = identity(root: .flatpakInfo(info), label: "snap.mail.mail (enforce)")
        XCTAssertNotNil(caller.failure)
        XCTAssertEqual(identity(root: .flatpakInfo(info), label: "snap.mail.mail (complain)").app.description, "flatpak:org.example.Mail")
    }

    func testPrintableAppNames() {
        XCTAssertEqual(AppID(parsing: "flatpak:org.example.Mail")?.kind, .flatpak)
        XCTAssertEqual(AppID(parsing: "snap:firefox")?.name, "firefox")
        XCTAssertEqual(AppID(parsing: "exe:/usr/bin/az")?.name, "/usr/bin/az")
        for bad in ["exe:az", "unknown:pid 1", "firefox", "flatpak:", ":x"] { XCTAssertNil(AppID(parsing: bad), bad) }
    }

    // MARK: Policy

    private let mail = CallerIdentity(uid: 1000, pid: 1, executable: "/usr/bin/bwrap", sandbox: .flatpak(appId: "org.example.Mail", instanceId: "1"))
    private let az = CallerIdentity(uid: 1000, pid: 2, executable: "/usr/bin/az")

    func testDefaultsChangeNothingForUnsandboxedAppsAndAskForSandboxedOnes() {
        let policy = AppPolicy()
        XCTAssertEqual(policy.decide(az, clientId: "c", account: nil, scopes: ["User.Read"]), .allow(.unsandboxedDefault))
        XCTAssertEqual(policy.decide(mail, clientId: "c", account: nil, scopes: ["User.Read"]), .ask)
        let unknown = CallerIdentity.unidentified(uid: 1000, pid: 3, executable: nil, reason: "gone")
        guard case .refuse(let refusal) = policy.decide(unknown, clientId: "c", account: nil, scopes: []) else { return XCTFail() }
        XCTAssertEqual(refusal.reason, .unidentifiedCaller)
    }

    /// A connection's memo of the client IDs its app may use whatever it asks: the one allowed last is answered
    /// without a lookup, and it is forgotten with the rest when the policy changes.
    func testAnAccessMemoForgetsEvenItsLastClientWhenThePolicyChanges() async throws {
        let access = try AppAccess(settings: AppPolicySettings(), databasePath: nil, logger: Logger(label: "test"))
        var memo = AccessMemo()
        let scopes = ["User.Read"]
        for clientId in ["c1", "c2", "c1", "c1", "c2"] {
            XCTAssertTrue(memo.allows(az, clientId: clientId, account: nil, scopes: scopes, in: access), clientId)
        }
        await access.update(AppPolicySettings(unsandboxedApps: .pinned), retention: .init())
        for clientId in ["c2", "c1"] {
            XCTAssertFalse(memo.allows(az, clientId: clientId, account: nil, scopes: scopes, in: access), clientId)
        }
        await access.close()
    }

    func testUnsandboxedAppsAskedAboutOnceAGrantIsKept() {
        var policy = AppPolicy(settings: AppPolicySettings(unsandboxedApps: .ask))
        XCTAssertEqual(policy.decide(az, clientId: "c", account: nil, scopes: []), .ask)
        policy.set(AppGrant(app: az.app, clientId: "c", allowed: true, since: 0))
        XCTAssertEqual(policy.decide(az, clientId: "c", account: nil, scopes: []), .allow(.granted))
        XCTAssertEqual(policy.decide(az, clientId: "other", account: nil, scopes: []), .ask, "each client ID once")
    }

    func testAPinWinsOverEverythingElse() {
        var policy = AppPolicy(settings: AppPolicySettings(pins: [AppPin(clientId: "az", apps: [AppID(parsing: "exe:/usr/bin/az")!])]))
        policy.set(AppGrant(app: mail.app, clientId: "az", allowed: true, since: 0))
        XCTAssertEqual(policy.decide(az, clientId: "az", account: nil, scopes: []), .allow(.pinned))
        guard case .refuse(let refusal) = policy.decide(mail, clientId: "az", account: nil, scopes: []) else { return XCTFail() }
        XCTAssertEqual(refusal.reason, .pinnedToOtherApps)
        XCTAssertEqual(policy.decide(mail, clientId: "other", account: nil, scopes: []), .ask)
        // A client ID in another case is the same client ID: no way around a pin, a denial or a grant.
        guard case .refuse = policy.decide(mail, clientId: "AZ", account: nil, scopes: []) else { return XCTFail("case escapes the pin") }
        policy.set(AppGrant(app: mail.app, clientId: "Mail-Client", allowed: false, since: 0))
        guard case .refuse = policy.decide(mail, clientId: "mail-client", account: nil, scopes: []) else { return XCTFail() }
        XCTAssertEqual(policy.revoke(mail.app, clientId: "MAIL-CLIENT"), 1)
    }

    func testGrantsDenialsAndTheirLimits() {
        var policy = AppPolicy(settings: AppPolicySettings(sandboxedApps: .deny, unsandboxedApps: .pinned))
        guard case .refuse(let denied) = policy.decide(mail, clientId: "c", account: nil, scopes: []) else { return XCTFail() }
        XCTAssertEqual(denied.reason, .sandboxedAppsDenied)
        guard case .refuse(let notPinned) = policy.decide(az, clientId: "c", account: nil, scopes: []) else { return XCTFail() }
        XCTAssertEqual(notPinned.reason, .notPinned)
        policy.set(AppGrant(app: mail.app, clientId: "c", allowed: true, accounts: ["Alice@Contoso.example"],
                            scopes: ["https://graph.microsoft.com/Mail.*"], since: 0))
        let alice = (homeAccountId: Optional("a.t"), username: Optional("alice@contoso.example"))
        XCTAssertEqual(policy.decide(mail, clientId: "c", account: alice, scopes: ["https://graph.microsoft.com/mail.read", "openid"]),
                       .allow(.granted))
        guard case .refuse(let scope) = policy.decide(mail, clientId: "c", account: alice, scopes: ["https://graph.microsoft.com/User.Read"])
        else { return XCTFail() }
        XCTAssertEqual(scope.reason, .outsideGrant)
        guard case .refuse(let account) = policy.decide(mail, clientId: "c", account: ("b.t", "bob@contoso.example"),
                                                        scopes: ["https://graph.microsoft.com/Mail.Send"]) else { return XCTFail() }
        XCTAssertEqual(account.reason, .outsideGrant)
        policy.set(AppGrant(app: mail.app, clientId: "c", allowed: false, since: 0))
        guard case .refuse(let remembered) = policy.decide(mail, clientId: "c", account: alice, scopes: []) else { return XCTFail() }
        XCTAssertEqual(remembered.reason, .denied)
        XCTAssertEqual(policy.revoke(mail.app, clientId: nil), 1)
        guard case .refuse = policy.decide(mail, clientId: "c", account: alice, scopes: []) else { return XCTFail() }
    }

    func testScopePatterns() {
        XCTAssertTrue(AppGrant.matches(pattern: "*", "anything"))
        XCTAssertTrue(AppGrant.matches(pattern: "https://graph.microsoft.com/*.Read", "https://graph.microsoft.com/Mail.Read"))
        XCTAssertFalse(AppGrant.matches(pattern: "https://graph.microsoft.com/*.Read", "https://graph.microsoft.com/Mail.Send"))
        XCTAssertTrue(AppGrant.matches(pattern: "a*b*c", "aXXbYYc"))
        XCTAssertFalse(AppGrant.matches(pattern: "a*b*c", "aXXbYY"))
    }

    // MARK: The runtime: consent, persistence, audit

    func testAConsentIsAskedOnceAndItsAnswerKeptAcrossARestart() async throws {
        let path = NSTemporaryDirectory() + "apps-\(UInt32.random(in: 0 ... .max)).db"
        defer { unlink(path); unlink(path + "-wal"); unlink(path + "-shm") }
        let asking = try AppAccess(settings: AppPolicySettings(consentTimeoutSeconds: 30), databasePath: path,
                                   logger: Logger(label: "test"))
        let caller = mail
        let first = Task { await asking.authorize(caller, frontEnd: "socket", clientId: "c", account: nil, scopes: ["User.Read"]) }
        let second = Task { await asking.authorize(caller, frontEnd: "dbus", clientId: "c", account: nil, scopes: ["User.Read"]) }
        let access = asking
        var pending: [PendingConsent] = []
        for _ in 0..<500 where pending.first?.waiting != 2 {
            pending = await access.pendingConsents()
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertEqual(pending.count, 1, "one consent per app and client ID")
        XCTAssertEqual(pending.first?.waiting, 2)
        let answered = try await access.answer(mail.app, clientId: "c", with: .allow)
        XCTAssertEqual(answered, 2)
        let answers = [await first.value, await second.value]
        XCTAssertEqual(answers.map { (try? $0.get()) }, [.granted, .granted])
        await access.close()

        let reopened = try AppAccess(settings: AppPolicySettings(), databasePath: path, logger: Logger(label: "test"))
        XCTAssertEqual(reopened.decide(mail, clientId: "c", account: nil, scopes: []), .allow(.granted), "the grant was kept")
        let audit = try await reopened.audit(AuditFilter(app: "flatpak:org.example.Mail"))
        XCTAssertTrue(audit.isEmpty, "allowed requests are recorded by the front end with their outcome")
    }

    /// Rows are counted together only when every field is the same: a front end or an outcome of the same length
    /// as another's (the queue hashes those by their length) still makes a row of its own.
    func testAuditRowsAlikeButForAWordOfTheSameLengthStayApart() async throws {
        let access = try AppAccess(settings: AppPolicySettings(), databasePath: nil, retention: .init(days: 1, maximumRows: 1_000),
                                   logger: Logger(label: "test"))
        for (frontEnd, outcome) in [("socket", "cache"), ("socket", "cache"), ("socket", "fresh"), ("sockey", "cache")] {
            access.record(az, frontEnd: frontEnd, clientId: "c", scopes: ["User.Read"], homeAccountId: "a.t", username: nil,
                          outcome: outcome)
        }
        let rows = try await access.audit(AuditFilter())
        XCTAssertEqual(rows.map { "\($0.frontEnd) \($0.outcome) \($0.count)" }.sorted(),
                       ["socket cache 2", "socket fresh 1", "sockey cache 1"])
    }

    func testTheAuditCountsRepeatsFiltersAndPrunes() async throws {
        let access = try AppAccess(settings: AppPolicySettings(), databasePath: nil, retention: .init(days: 1, maximumRows: 1_000),
                                   logger: Logger(label: "test"))
        for _ in 0..<3 {
            access.record(az, frontEnd: "socket", clientId: "c", scopes: ["User.Read"], homeAccountId: "a.t",
                          username: "Alice@Contoso.example", outcome: "cache")
        }
        access.record(mail, frontEnd: "dbus", clientId: "c", scopes: ["User.Read"], homeAccountId: nil, username: nil,
                      outcome: "refused", detail: "denied: no")
        let all = try await access.audit(AuditFilter())
        XCTAssertEqual(all.map(\.outcome), ["refused", "cache"])
        XCTAssertEqual(all.last?.count, 3)
        let byApp = try await access.audit(AuditFilter(app: "exe:/usr/bin/az"))
        let byAccount = try await access.audit(AuditFilter(account: "alice@contoso.example"))
        let byClient = try await access.audit(AuditFilter(clientId: "other"))
        let seen = try await access.seenApps()
        XCTAssertEqual(byApp.count, 1)
        XCTAssertEqual(byAccount.count, 1)
        XCTAssertEqual(byClient.count, 0)
        XCTAssertEqual(seen.map(\.app), ["exe:/usr/bin/az", "flatpak:org.example.Mail"])
        for index in 0..<1_500 {
            access.record(az, frontEnd: "socket", clientId: "c\(index)", scopes: [], homeAccountId: nil, username: nil, outcome: "cache")
        }
        await access.flush()
        let rows = try await access.auditRowCount()
        XCTAssertEqual(rows, 1_000, "the row cap")
    }
}
