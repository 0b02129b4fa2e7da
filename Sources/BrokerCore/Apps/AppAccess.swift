import BrokerPlatform
import BrokerCache
import BrokerJSON
import BrokerStore
import Logging
import Synchronization

/// The app identity policy at run time, for both front ends: decides who gets which client ID's tokens (AppPolicy),
/// asks the user when the policy says so (one pending consent per app and client ID, answered by a notification action
/// or `brokerctl apps`), keeps grants and denials in `apps.db`, and writes the audit.
///
/// A cache hit asks `decide` (one uncontended lock, and a connection remembers the answer until `generation` moves:
/// AccessMemo); it never waits on this actor. Only requests the policy does not allow at once come here (`authorize`).
/// Audit rows are queued by the caller's thread and written by `runAuditWriter` in batches, off every request's path.
public actor AppAccess {
    private nonisolated let policy: Locked<AppPolicy>
    private nonisolated let changes = Atomic<UInt64>(1)
    /// When consents expire and audit rows are dated: the broker's clock.
    public nonisolated let clock: any BrokerClock
    private nonisolated let queue = Locked(AuditQueue())
    private nonisolated let countKeepers = Locked<[@Sendable () async -> Void]>([])
    private let database: AppDatabase
    private let logger: Logger
    private var retention: AuditRetention
    private var pending: [AppPolicy.GrantKey: Waiting] = [:]
    private var lastPrune: Int64 = 0
    private var rowsSincePrune = 0
    /// Told of every change that can change an answer a connection remembers (`Broker.forgetRememberedAnswers`).
    private nonisolated let onChange: @Sendable () -> Void
    /// consentPending and consentEnded, published in the order they happen by one task (`events` of `init`).
    private nonisolated let published: AsyncStream<BrokerEvent>.Continuation

    private struct Waiting {
        var consent: PendingConsent
        var continuations: [CheckedContinuation<ConsentEnd, Never>]
        var timeout: Task<Void, Never>?
    }

    public struct AuditRetention: Sendable, Equatable {
        public var days: Int
        public var maximumRows: Int
        public init(days: Int = 90, maximumRows: Int = 1_000_000) {
            self.days = days
            self.maximumRows = maximumRows
        }
    }

    /// Why the app database is kept in memory although a path was given (it could not be opened), for the status.
    public nonisolated let problem: String?

    /// `databasePath` nil keeps everything in memory (the `memory` key store); a database that cannot be opened (a
    /// read-only state directory) is kept in memory too, with `problem` saying so: brokerd serves on, and the grants
    /// made meanwhile last until it stops. `events` publishes consentPending and consentEnded; `onChange` is called
    /// whenever a grant, denial or setting changes.
    public init(settings: AppPolicySettings, databasePath: String?, retention: AuditRetention = AuditRetention(),
                clock: any BrokerClock = SystemClock(), logger: Logger,
                events: @escaping @Sendable (BrokerEvent) async -> Void = { _ in },
                onChange: @escaping @Sendable () -> Void = {}) throws {
        self.clock = clock
        var problem: String?
        do {
            database = try AppDatabase(path: databasePath ?? ":memory:")
        } catch {
            guard let databasePath else { throw error }
            problem = "the app database \(databasePath) cannot be opened (\(error)): grants, denials and the audit are kept "
                + "in memory until brokerd stops"
            logger.error("\(problem!)")
            database = try AppDatabase(path: ":memory:")
        }
        self.problem = problem
        let grants = try database.grants().compactMap(Self.grant(from:))
        policy = Locked(AppPolicy(settings: settings, grants: grants))
        self.retention = retention
        self.logger = logger
        self.onChange = onChange
        let (stream, continuation) = AsyncStream<BrokerEvent>.makeStream()
        published = continuation
        Task { for await event in stream { await events(event) } }
    }

    deinit { published.finish() }

    private nonisolated func publish(_ event: BrokerEvent) { published.yield(event) }

    // MARK: Deciding

    /// Moves whenever a grant, a denial or a setting changes: what a connection remembered of `decide` holds while it
    /// stays the same.
    public nonisolated var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// The policy's answer now, without waiting: `ask` means the request must go to `authorize`.
    public nonisolated func decide(_ caller: CallerIdentity, clientId: String, account: (homeAccountId: String?, username: String?)?,
                                   scopes: [String]) -> AccessDecision {
        policy.withLock { $0.decide(caller, clientId: clientId, account: account, scopes: scopes) }
    }

    /// The accounts of `accounts` the caller may see for `clientId`: those the policy lets it use now (a grant limited to
    /// accounts shows only those). A list is no reason to ask the user: an app the policy would ask about sees none.
    public nonisolated func visible(_ accounts: [AccountSummary], to caller: CallerIdentity, clientId: String) -> [AccountSummary] {
        policy.withLock { policy in
            accounts.filter { account in
                if case .allow = policy.decide(caller, clientId: clientId, account: (account.homeAccountId, account.username),
                                               scopes: []) { return true }
                return false
            }
        }
    }

    /// Whether an allowed client ID may be remembered as allowed for this caller whatever account or scopes it asks
    /// next: true unless a grant with limits allowed it.
    nonisolated func isUnlimited(_ app: AppID, clientId: String) -> Bool {
        policy.withLock { policy in policy.grant(app, clientId: clientId).map { $0.accounts.isEmpty && $0.scopes.isEmpty } ?? true }
    }

    /// The policy's answer, asking the user when it says so and waiting (at most `consent_timeout`) for the answer.
    /// A refusal is on the record before this returns. Only a question goes through the actor.
    public nonisolated func authorize(_ caller: CallerIdentity, frontEnd: String, clientId: String,
                                      account: (homeAccountId: String?, username: String?)?,
                                      scopes: [String]) async -> Result<AccessBasis, AccessRefusal> {
        let result: Result<AccessBasis, AccessRefusal>
        switch decide(caller, clientId: clientId, account: account, scopes: scopes) {
        case .allow(let basis): return .success(basis)
        case .refuse(let refusal): result = .failure(refusal)
        case .ask: result = await ask(caller, frontEnd: frontEnd, clientId: clientId, account: account, scopes: scopes)
        }
        if case .failure(let refusal) = result {
            recordRefusal(refusal, caller: caller, frontEnd: frontEnd, scopes: scopes, account: account)
        }
        return result
    }

    private func ask(_ caller: CallerIdentity, frontEnd: String, clientId: String,
                     account: (homeAccountId: String?, username: String?)?, scopes: [String]) async -> Result<AccessBasis, AccessRefusal> {
        // Answered since the caller looked (a grant made meanwhile): no question.
        switch decide(caller, clientId: clientId, account: account, scopes: scopes) {
        case .allow(let basis): return .success(basis)
        case .refuse(let refusal): return .failure(refusal)
        case .ask: break
        }
        switch await waitForConsent(caller, frontEnd: frontEnd, clientId: clientId) {
        case .allowedOnce: return .success(.allowedOnce)
        case .allowed:
            // Decided again: a grant made for other accounts or scopes does not cover this request.
            switch decide(caller, clientId: clientId, account: account, scopes: scopes) {
            case .allow(let basis): return .success(basis)
            case .refuse(let refusal): return .failure(refusal)
            case .ask: return .success(.granted)
            }
        case .denied:
            return .failure(AccessRefusal(.denied, app: caller.app, clientId: clientId,
                                          message: "the user denied \(caller.app) client ID \(clientId)"))
        case .timedOut:
            return .failure(AccessRefusal(.consentTimedOut, app: caller.app, clientId: clientId,
                message: "nobody answered whether \(caller.app) may use client ID \(clientId) within "
                    + "\(policy.withLock { $0.settings.consentTimeoutSeconds }) s (brokerctl apps allow, or the notification)"))
        }
    }

    private func waitForConsent(_ caller: CallerIdentity, frontEnd: String, clientId: String) async -> ConsentEnd {
        let key = AppPolicy.GrantKey(app: caller.app, clientId: clientId)
        return await withCheckedContinuation { continuation in
            if var waiting = pending[key] {
                waiting.continuations.append(continuation)
                waiting.consent.waiting += 1
                pending[key] = waiting
                return
            }
            let now = clock.now()
            let timeout = policy.withLock { $0.settings.consentTimeoutSeconds }
            let consent = PendingConsent(consentId: Self.newConsentId(), app: caller.app, executable: caller.executable,
                                         clientId: clientId, frontEnd: frontEnd, since: now, expiresOn: now + Int64(timeout),
                                         waiting: 1)
            let consentId = consent.consentId
            let timer = Task { [weak self, clock] in
                try? await clock.sleep(seconds: Int64(timeout))
                guard !Task.isCancelled else { return }
                await self?.end(key, .timedOut, ifStill: consentId)
            }
            pending[key] = Waiting(consent: consent, continuations: [continuation], timeout: timer)
            logger.notice("an app waits for the user's consent", metadata: [
                "app": "\(caller.app)", "client_id": "\(clientId)", "consent_id": "\(consent.consentId)",
                "pid": "\(caller.pid)", "front_end": "\(frontEnd)",
            ])
            publish(.consentPending(consent))
        }
    }

    /// Ends the consent pending for `key`; with `consentId`, only if that is still the one pending (a timeout that
    /// fires as an answer lands must not end the next question).
    private func end(_ key: AppPolicy.GrantKey, _ end: ConsentEnd, ifStill consentId: String? = nil) {
        if let consentId, pending[key]?.consent.consentId != consentId { return }
        guard let waiting = pending.removeValue(forKey: key) else { return }
        waiting.timeout?.cancel()
        for continuation in waiting.continuations { continuation.resume(returning: end) }
        logger.notice("consent ended", metadata: [
            "app": "\(key.app)", "client_id": "\(key.clientId)", "outcome": "\(end.rawValue)",
            "consent_id": "\(waiting.consent.consentId)",
        ])
        publish(.consentEnded(waiting.consent, end))
    }

    private static func newConsentId() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(UInt64.random(in: 0 ... .max, using: &generator), radix: 16)
    }

    public func pendingConsents() -> [PendingConsent] {
        pending.values.map(\.consent).sorted { ($0.since, $0.consentId) < ($1.since, $1.consentId) }
    }

    // MARK: The user's answers

    /// Answers a pending consent, or sets the answer ahead of time. `allow` and `deny` are kept until revoked;
    /// `allowOnce` lets only the requests waiting now go ahead. Returns how many waiting requests it answered.
    @discardableResult
    public func answer(_ app: AppID, clientId: String, with answer: ConsentAnswer, accounts: [String] = [],
                       scopes: [String] = []) throws -> Int {
        let key = AppPolicy.GrantKey(app: app, clientId: clientId)
        let waiting = pending[key]?.continuations.count ?? 0
        switch answer {
        case .allowOnce:
            guard waiting > 0 else { throw AccessSettingError.nothingPending(app: app, clientId: clientId) }
            end(key, .allowedOnce)
        case .allow, .deny:
            let grant = AppGrant(app: app, clientId: clientId, allowed: answer == .allow, accounts: accounts, scopes: scopes,
                                 since: clock.now())
            try database.setGrant(GrantRow(app: app.description, clientId: grant.clientId, allowed: grant.allowed,
                                           accounts: accounts, scopes: scopes, since: grant.since))
            policy.withLock { $0.set(grant) }
            changed()
            logger.notice(grant.allowed ? "app granted a client ID" : "app denied a client ID", metadata: [
                "app": "\(app)", "client_id": "\(clientId)", "accounts": "\(accounts.joined(separator: " "))",
                "scopes": "\(scopes.joined(separator: " "))",
            ])
            end(key, answer == .allow ? .allowed : .denied)
        }
        return waiting
    }

    /// Answers a pending consent by its id (the notification's actions know only that).
    @discardableResult
    public func answer(consentId: String, with answer: ConsentAnswer) throws -> Int {
        guard let consent = pending.values.first(where: { $0.consent.consentId == consentId })?.consent else { return 0 }
        return try self.answer(consent.app, clientId: consent.clientId, with: answer)
    }

    /// Forgets the grants and denials of `app` (one client ID, or all). Tokens stay: they belong to the account.
    public func revoke(_ app: AppID, clientId: String?) throws -> Int {
        let removed = try database.removeGrants(app: app.description, clientId: clientId?.lowercased())
        _ = policy.withLock { $0.revoke(app, clientId: clientId) }
        changed()
        logger.notice("app grants revoked", metadata: ["app": "\(app)", "client_id": "\(clientId ?? "*")", "removed": "\(removed)"])
        return removed
    }

    /// New settings from a reloaded configuration; grants stay.
    public func update(_ settings: AppPolicySettings, retention: AuditRetention) {
        policy.withLock { $0.settings = settings }
        self.retention = retention
        changed()
    }

    public nonisolated var settings: AppPolicySettings { policy.withLock { $0.settings } }

    public func grants() -> [AppGrant] {
        policy.withLock { Array($0.grants.values) }.sorted { ($0.app, $0.clientId) < ($1.app, $1.clientId) }
    }

    private func changed() {
        changes.add(1, ordering: .releasing)
        onChange()
    }

    // MARK: The record

    /// Queues an audit row (any thread; a lock held for an append). Equal rows in a row are counted as one.
    public nonisolated func record(_ row: AuditRow, kind: AppID.Kind, unit: String?) {
        queue.withLock { $0.add(row, kind: kind, unit: unit) }
    }

    /// Queues rows of one caller's calls under one taking of the queue's lock: a connection hands over a window's
    /// tallies at once (thousands, when it asked for thousands of different tokens), and a lock taken per row made
    /// every other connection's hand-over queue behind it.
    public nonisolated func record(_ rows: [AuditRow], of caller: CallerIdentity) {
        guard !rows.isEmpty else { return }
        queue.withLock { queue in
            for row in rows { queue.add(row, kind: caller.app.kind, unit: caller.unit) }
        }
    }

    /// Queues the record of a call the caller made, outcome decided.
    public nonisolated func record(_ caller: CallerIdentity, frontEnd: String, clientId: String, scopes: [String],
                                   homeAccountId: String?, username: String?, outcome: String, detail: String? = nil,
                                   count: Int = 1, since: Int64? = nil, until: Int64? = nil) {
        record(auditRow(caller, frontEnd: frontEnd, clientId: clientId, scopes: scopes, homeAccountId: homeAccountId,
                             username: username, outcome: outcome, detail: detail, count: count, since: since, until: until),
               kind: caller.app.kind, unit: caller.unit)
    }

    /// The audit's row of a call the caller made.
    public nonisolated func auditRow(_ caller: CallerIdentity, frontEnd: String, clientId: String, scopes: [String],
                                            homeAccountId: String?, username: String?, outcome: String, detail: String? = nil,
                                            count: Int = 1, since: Int64? = nil, until: Int64? = nil) -> AuditRow {
        let now = until ?? clock.now()
        return AuditRow(time: since ?? now, lastTime: now, count: count, frontEnd: frontEnd, app: caller.app.description,
                        pid: caller.pid, executable: caller.executable, clientId: clientId, scopes: scopes.joined(separator: " "),
                        homeAccountId: homeAccountId, username: username, outcome: outcome, detail: detail)
    }

    private nonisolated func recordRefusal(_ refusal: AccessRefusal, caller: CallerIdentity, frontEnd: String, scopes: [String],
                                           account: (homeAccountId: String?, username: String?)?) {
        record(caller, frontEnd: frontEnd, clientId: refusal.clientId, scopes: scopes, homeAccountId: account?.homeAccountId,
               username: account?.username, outcome: "refused", detail: "\(refusal.reason.rawValue): \(refusal.message)")
    }

    /// A front end that counts cache hits before handing them over (`HitAudit`) and can be asked to hand them over at
    /// once: each read of the audit asks it first, so that the reader sees every call made before it asked (a D-Bus
    /// caller behind xdg-dbus-proxy is one unique name for as long as the app runs).
    public nonisolated func handsOverCountsBeforeReads(_ handOver: @escaping @Sendable () async -> Void) {
        countKeepers.withLock { $0.append(handOver) }
    }

    private func collectCounts() async {
        for handOver in countKeepers.withLock({ $0 }) { await handOver() }
    }

    /// Writes what was queued, and then prunes the audit to its retention (at most once a minute, or whenever a tenth
    /// of the row cap came in). Called by `runAuditWriter`, and before reads so that a reader sees every call made
    /// before it asked.
    public func flush() {
        let (rows, apps) = queue.withLock { $0.take() }
        // Nothing to write: an idle daemon leaves the database alone (pruning waits for the next write).
        guard !rows.isEmpty || !apps.isEmpty else { return }
        do {
            try database.append(rows, apps: apps)
        } catch {
            logger.error("audit rows could not be written; they are kept for the next try", metadata: ["error": "\(error)",
                                                                                                     "rows": "\(rows.count)"])
            queue.withLock { $0.putBack(rows, apps) }
            return
        }
        rowsSincePrune += rows.count
        let now = clock.now()
        // Once a minute, and whenever a tenth of the row cap came in since: the cap holds within 10 %.
        guard now - lastPrune >= 60 || rowsSincePrune >= max(1, retention.maximumRows / 10) else { return }
        lastPrune = now
        rowsSincePrune = 0
        do {
            let removed = try database.prune(before: now - Int64(retention.days) * 86_400, maximumRows: retention.maximumRows)
            if removed > 0 { logger.debug("audit pruned", metadata: ["rows": "\(removed)"]) }
        } catch {
            logger.error("audit could not be pruned", metadata: ["error": "\(error)"])
        }
    }

    /// Writes the queued audit every `interval` until cancelled, then once more.
    public func runAuditWriter(interval: Duration = .seconds(1)) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            flush()
        }
        flush()
    }

    public func audit(_ filter: AuditFilter) async throws -> [AuditRow] {
        await collectCounts()
        flush()
        return try database.audit(filter)
    }

    public func auditRowCount() async throws -> Int {
        await collectCounts()
        flush()
        return try database.auditRowCount()
    }

    public func seenApps() async throws -> [SeenAppRow] {
        await collectCounts()
        flush()
        return try database.apps()
    }

    public func close() {
        flush()
        database.close()
    }

    static func grant(from row: GrantRow) -> AppGrant? {
        guard let app = AppID(parsing: row.app) else { return nil }
        return AppGrant(app: app, clientId: row.clientId, allowed: row.allowed, accounts: row.accounts, scopes: row.scopes,
                        since: row.since)
    }
}

public enum AccessSettingError: Error, Sendable, CustomStringConvertible {
    case nothingPending(app: AppID, clientId: String)

    public var description: String {
        switch self {
        case .nothingPending(let app, let clientId):
            return "no request of \(app) for client ID \(clientId) is waiting: \"allow once\" answers only a waiting request"
        }
    }
}

/// Audit rows waiting for the writer, and the apps they name.
struct AuditQueue {
    private var rows: [AuditRow] = []
    /// Where the waiting row of each kind of call is: calls alike (same app, process, client ID, account, scopes,
    /// outcome) are one row with a count until the writer takes them, whichever connections made them.
    private var indexes: [RowKey: Int] = [:]
    private var apps: [String: SeenAppRow] = [:]

    private struct RowKey: Hashable {
        var app: String, pid: Int32, clientId: String, scopes: String, homeAccountId: String?, outcome: String
        var frontEnd: String, detail: String?

        init(_ row: AuditRow) {
            (app, pid, clientId, scopes, homeAccountId) = (row.app, row.pid, row.clientId, row.scopes, row.homeAccountId)
            (outcome, frontEnd, detail) = (row.outcome, row.frontEnd, row.detail)
        }

        /// By `ByteDigest` (D-Bus queues a row per token handed out; SipHash over its few hundred bytes was most of
        /// queueing it). The words that name a front end or an outcome are short and few: their length stands in.
        func hash(into hasher: inout Hasher) {
            var digest = ByteDigest.of(app) ^ ByteDigest.of(clientId) &* 3 ^ ByteDigest.of(scopes) &* 5
            if let homeAccountId { digest ^= ByteDigest.of(homeAccountId) &* 7 }
            if let detail { digest ^= ByteDigest.of(detail) &* 11 }
            hasher.combine(digest)
            hasher.combine(pid)
            hasher.combine(outcome.utf8.count &* 64 &+ frontEnd.utf8.count)
        }
    }
    /// Past this many rows waiting (a writer that cannot write), equal rows are still counted, new ones dropped and counted.
    static let limit = 100_000
    private var dropped = 0

    mutating func add(_ row: AuditRow, kind: AppID.Kind, unit: String?) {
        let key = RowKey(row)
        if let index = indexes[key] {
            rows[index].count += row.count
            rows[index].time = min(rows[index].time, row.time)
            rows[index].lastTime = max(rows[index].lastTime, row.lastTime)
            if rows[index].username == nil { rows[index].username = row.username }
        } else if rows.count < Self.limit {
            indexes[key] = rows.count
            rows.append(row)
        } else {
            dropped += row.count
        }
        if var seen = apps[row.app] {
            seen.lastSeen = max(seen.lastSeen, row.lastTime)
            if !seen.clientIds.contains(row.clientId) { seen.clientIds.append(row.clientId) }
            apps[row.app] = seen
        } else {
            apps[row.app] = SeenAppRow(app: row.app, kind: kind.rawValue, executable: row.executable, unit: unit,
                                       firstSeen: row.time, lastSeen: row.lastTime, clientIds: [row.clientId])
        }
    }

    mutating func take() -> ([AuditRow], [SeenAppRow]) {
        var taken = rows
        if dropped > 0 {
            // Whose calls they were is not known any more: the row says how many, and of nobody in particular.
            let now = taken.last?.lastTime ?? 0
            taken.append(AuditRow(time: now, count: dropped, frontEnd: "-", app: "unknown:audit", pid: 0, executable: nil,
                                  clientId: "-", scopes: "", homeAccountId: nil, username: nil, outcome: "unrecorded",
                                  detail: "\(dropped) calls were counted but not recorded: the audit could not be written"))
            dropped = 0
        }
        defer {
            rows = []
            indexes = [:]
            apps = [:]
        }
        return (taken, Array(apps.values))
    }

    mutating func putBack(_ taken: [AuditRow], _ seen: [SeenAppRow]) {
        let all = taken + rows
        dropped += all.dropLast(Self.limit).reduce(0) { $0 + $1.count }
        rows = Array(all.suffix(Self.limit))
        indexes = [:]  // the rows put back count the calls alike that come after them
        for (index, row) in rows.enumerated() where indexes[RowKey(row)] == nil { indexes[RowKey(row)] = index }
        for app in seen where apps[app.app] == nil { apps[app.app] = app }
    }
}
