import BrokerCache
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The broker: owns the cache, answers account questions, and persists changes.
///
/// Writes are group commits of rows: a change marks the rows it touched, and the writer persists the rows marked
/// since its last write in one transaction (CacheStore). Changes made while a write runs go into the next one, so a
/// burst costs a few writes, and a write costs its rows, not the cache. Callers that must not answer before their
/// change is on disk `await` durability. A write that fails leaves its rows marked and is retried with backoff; the
/// failure shows in the status until a write succeeds.
public actor Broker {
    public struct Status: Sendable {
        public var accounts: Int
        public var accessTokens: Int
        public var refreshTokens: Int
        public var idTokens: Int
        public var appMetadata: Int
        public var cachePath: String?
        public var keyStore: KeyStore
        /// Why that key store is in use (see CacheStore.keyStoreReason).
        public var keyStoreReason: String? = nil
        public var lastWrite: Int64?
        public var lastWriteError: String?
        public var problems: [String]
        /// Databases kept for a key the key store does not hold now (WaitingCaches.swift).
        public var waitingCaches: [String] = []
        public var signInRequired: [String]
        public var startedAt: Int64
        public var pendingSignIns: [PendingSignIn] = []
        /// Hosts the network could not reach lately (backing off), and what the network told brokerd (by fact).
        public var unreachableHosts: [(host: String, why: String, failures: Int, retryAfter: Int64)] = []
        public var learned: [(kind: NetworkMemory.Kind, subject: String, learnedAt: Int64)] = []
        /// Each IdP host's clock minus ours (seconds), from its last answer's `Date` header, and when it was read.
        public var clockSkew: [(host: String, skewSeconds: Int64, measuredAt: Int64)] = []
    }

    public enum Failure: Error, Sendable, CustomStringConvertible {
        case lookup(TokenCache.LookupError)
        case invalidDocument(String)
        case notPersisted(String)
        /// A key given to open a waiting cache that is not 256 bits.
        case invalidKey(bytes: Int)

        public var description: String {
            switch self {
            case .lookup(.notFound(let what)): return "no account matches \(what)"
            case .lookup(.ambiguous(let what, let matches)):
                return "\(what) matches \(matches.count) accounts (\(matches.joined(separator: ", "))); use a homeAccountId"
            case .invalidDocument(let why): return "the cache document cannot be read: \(why)"
            case .notPersisted(let why): return "the change is in memory but could not be written to disk: \(why)"
            case .invalidKey(let bytes): return "a cache key is 32 bytes (256 bits); the one given has \(bytes)"
            }
        }
    }

    /// The cache, behind a lock so that cache hits are answered without the actor (CacheCell.swift). The actor
    /// remains the only writer of anything but token-use bookkeeping.
    let cell: CacheCell
    var cache: TokenCache {
        get { cell.cache }
        _modify { yield &cell.cache }
    }
    let store: CacheStore
    let logger: Logger
    private let writeDelay: Duration
    private var problems: [String] = []
    /// The database in use and the ones waiting for their keys, as the store last said (status reads them here).
    var cacheFile: String?
    var waitingCaches: [String] = []
    var waitingProblems: [String] = []
    /// The recovery of waiting caches under way: one at a time (Broker+WaitingCaches.swift).
    var recovery: Task<Recovery, Error>?
    private let startedAt: Int64
    /// Wall time and elapsed time, as everything the broker decides reads them: tests pass a ManualClock.
    public nonisolated let clock: any BrokerClock

    private var generation = 0
    private var durableGeneration = 0
    private var writer: Task<Void, Never>?
    private var waiters: [(generation: Int, continuation: CheckedContinuation<Void, Error>)] = []
    private var lastWrite: Int64?
    private var lastWriteError: String?
    private var stopping = false
    /// While the merged cache moves into another database (`adoptWaiting`): no write starts.
    private var adopting = false
    /// Between `open` and the end of `finishLoading`: the cache in `cell` is partial (PartialCache).
    private var loading = false
    private var loadWaiters: [CheckedContinuation<Void, Never>] = []
    public private(set) var writeCount = 0
    /// Rows in the last successful write (a change costs its rows, not the cache).
    public private(set) var lastWriteRows = 0

    // Token acquisition (Tokens/): the IdP side, shared refreshes, running interactive flows, subscribers.
    var identity: IdPClient? {
        get { cell.withLock { $0.identity } }
        set { cell.withLock { $0.identity = newValue } }
    }
    var refreshFlights: [String: Task<TokenOutcome, Error>] = [:]
    var interactiveFlows: [String: Task<InteractiveResult, Error>] = [:]
    var interactiveSlots: Set<String> = []
    /// Device-code sign-ins waiting for the user, by request id (Tokens/PendingSignIns.swift).
    var pendingSignIns: [String: PendingSignIn] = [:]
    var subscribers: [Int: AsyncStream<BrokerEvent>.Continuation] = [:]
    /// Backoff of the background refresh per token use (Tokens/BackgroundRefresh.swift).
    var refreshBackoff: [String: (failures: Int, nextAttempt: Int64)] = [:]
    /// The background refresh's wait between checks: cancelled to check at once (the network came back).
    var refreshWait: Task<Void, Never>?
    /// A change of the network came while a check was running: the next wait is skipped.
    var refreshAgain = false
    var nextSubscriber = 0

    public init(store: CacheStore, writeDelay: Duration = .zero, identity: IdPClient? = nil, clock: any BrokerClock = SystemClock(),
                logger: Logger) {
        self.store = store
        self.clock = clock
        startedAt = clock.now()
        cell = CacheCell(CacheCell.Contents(cache: TokenCache(), identity: identity))
        self.writeDelay = writeDelay
        self.logger = logger
    }

    /// Wall-clock Unix seconds on the broker's clock (`clock.now()`).
    public nonisolated func now() -> Int64 { clock.now() }

    /// Seconds on the broker's clock that only moves forward (`clock.elapsed()`).
    public nonisolated func elapsed() -> Int64 { clock.elapsed() }

    /// Loads the persisted cache (`open`, then `finishLoading`). A key store that cannot be used is an error (brokerd
    /// refuses to start); an unreadable cache file is moved aside and reported in the status.
    public func start() async throws {
        try await open()
        try await finishLoading()
    }

    /// Opens the persisted cache without reading it all: from here on `cachedSilentToken` answers hits, reading each
    /// account it is asked for on its own, while everything else waits in `loaded()` until `finishLoading` has
    /// read the whole cache. This is how brokerd answers its first request within milliseconds at any cache size.
    public func open() async throws {
        defer { logWaiting() }
        let opened = try await store.open()
        await refreshWaiting()
        switch opened {
        case .loaded(let loaded):
            cache = loaded.cache
            report(loaded.problems)
            announceLoaded()
        case .stored(let problems, let reader):
            report(problems)
            // Shown as the write failure it will be from the first change on, until a write succeeds.
            lastWriteError = await store.readOnlyReason
            loading = true
            guard let reader else { return }
            if let partial = PartialCache(reader: reader) {
                cell.withLock { contents in
                    contents.cache = partial.cache
                    contents.partial = partial
                    contents.cacheChanged()
                }
            } else {
                reader.close()
            }
        }
    }

    /// Reads the whole cache after `open` and puts it in place of the partial one; uses noted by the hits meanwhile
    /// are kept. Those waiting in `loaded()` go on.
    public func finishLoading() async throws {
        guard loading else { return }
        let loaded = try await store.loadAll()
        let reader = cell.withLock { contents -> AccountRowReader? in
            var full = loaded.cache
            for use in contents.cache.state.uses.values { full.noteUse(use) }
            contents.cache = full
            contents.cacheChanged()
            defer { contents.partial = nil }
            return contents.partial?.reader
        }
        reader?.close()
        report(loaded.problems)
        loading = false
        announceLoaded()
        for waiter in loadWaiters { waiter.resume() }
        loadWaiters = []
    }

    /// Returns once the whole cache is in memory (at once, unless `open` was called and `finishLoading` has not
    /// finished). Every use of the cache other than `cachedSilentToken` must come after it: front ends call it
    /// before anything but a cache hit.
    public func loaded() async {
        guard loading else { return }
        await withCheckedContinuation { loadWaiters.append($0) }
    }

    private func report(_ found: [String]) {
        for problem in found {
            problems.append(problem)
            logger.error("\(problem)")
        }
    }

    private func announceLoaded() {
        logger.info("cache loaded", metadata: [
            "accounts": "\(cache.count(.account))", "refresh_tokens": "\(cache.count(.refreshToken))",
            "key_store": "\(store.keyStore.name)",
        ])
    }

    // MARK: Accounts

    public func accounts(visibleTo clientId: String?) -> [AccountSummary] {
        cache.accountSummaries(visibleTo: clientId, now: now())
    }

    /// The account a selector names, as `clientId` sees it (nil when there is none or it was removed from the client).
    public func account(_ selector: AccountSelector, visibleTo clientId: String) throws -> AccountSummary? {
        let hid: String
        do { hid = try cache.resolve(selector) } catch .notFound { return nil } catch { throw Failure.lookup(error) }
        guard !cache.state.isHidden(hid, from: clientId) else { return nil }
        return cache.accountSummary(homeAccountId: hid, now: now())
    }

    /// One account's summary, whoever it is visible to (a token answer carries it).
    public func accountSummary(homeAccountId: String) -> AccountSummary? {
        cache.accountSummary(homeAccountId: homeAccountId, now: now())
    }

    public func removeAccount(_ selector: AccountSelector, forClient clientId: String) async throws -> RemovalReport {
        let hid = try resolve(selector)
        let report = cache.removeAccount(hid, forClient: clientId)
        cache.forgetUses(of: hid, clientId: clientId)
        logger.info("account removed for one client", metadata: [
            "account": "\(hid)", "client_id": "\(clientId)", "access_tokens": "\(report.accessTokens)",
            "refresh_tokens": "\(report.refreshTokens)", "family_refresh_tokens_kept": "\(report.familyRefreshTokensKept)",
        ])
        try await commit()
        emit(.accountRemoved(homeAccountId: hid, clientId: clientId))
        return report
    }

    public func signOut(_ selector: AccountSelector) async throws -> RemovalReport {
        let hid = try resolve(selector)
        let report = cache.signOut(hid)
        cache.forgetUses(of: hid, clientId: nil)
        logger.info("account signed out everywhere", metadata: [
            "account": "\(hid)", "refresh_tokens": "\(report.refreshTokens)", "access_tokens": "\(report.accessTokens)",
        ])
        try await commit()
        emit(.accountRemoved(homeAccountId: hid, clientId: nil))
        return report
    }

    /// Merges an MSAL document. Parsed off the actor; merged in parts, so that cache hits go on between parts even
    /// for a document of hundreds of thousands of entries. Durable when it returns.
    public nonisolated func importCache(_ bytes: [UInt8]) async throws -> ImportReport {
        let document: CacheDocument
        do { document = try CacheDocument.parse(bytes) } catch { throw Failure.invalidDocument(error.description) }
        return try await importDocument(document)
    }

    public func importDocument(_ document: CacheDocument) async throws -> ImportReport {
        var report = ImportReport()
        cache.reserveCapacity(forMerging: document)
        let parts = document.parts(of: Self.importPartSize)
        for (number, part) in parts.enumerated() {
            let merged = cache.merge(part)
            report.added += merged.added
            report.replaced += merged.replaced
            report.keptNewer += merged.keptNewer
            report.accounts += merged.accounts
            // A large import is written while it is merged: the writer takes what is merged so far and SQLite writes
            // it on the store's thread while the next parts are merged here (writing is twice merging). The answer
            // still waits for the whole import to be durable (`commit`, below).
            if number + 1 < parts.count {
                changed()
                await Task.yield()
            }
        }
        logger.info("cache imported", metadata: [
            "added": "\(report.added)", "replaced": "\(report.replaced)", "kept_newer": "\(report.keptNewer)",
        ])
        try await commit()
        emit(.statusChanged)
        return report
    }

    static let importPartSize = 2_000

    public func exportCache() -> [UInt8] { cache.exported() }

    /// The document to export (brokerd's own state left out), for writing elsewhere: a copy that shares storage
    /// with the cache, so it is cheap to take.
    public func exportDocument() -> CacheDocument { cache.document }

    private func resolve(_ selector: AccountSelector) throws -> String {
        do { return try cache.resolve(selector) } catch { throw Failure.lookup(error) }
    }

    // MARK: Status

    public func status() -> Status {
        Status(
            accounts: cache.homeAccountCount,
            accessTokens: cache.count(.accessToken),
            refreshTokens: cache.count(.refreshToken),
            idTokens: cache.count(.idToken),
            appMetadata: cache.count(.appMetadata),
            cachePath: store.keyStore == .memory ? nil : cacheFile,
            keyStore: store.keyStore,
            keyStoreReason: store.keyStoreReason,
            lastWrite: lastWrite,
            lastWriteError: lastWriteError,
            problems: problems + waitingProblems,
            waitingCaches: waitingCaches,
            signInRequired: cache.state.signInRequired.sorted(),
            startedAt: startedAt,
            pendingSignIns: pendingSignInList(),
            unreachableHosts: (identity?.transport.backoff.unreachableHosts() ?? []).map { ($0.host, $0.why, $0.failures, $0.retryAfter) },
            learned: cache.learned.facts.compactMap { key, fact in
                NetworkMemory.parse(key: key).map { ($0.kind, $0.subject, fact.learnedAt) }
            }.sorted { ($0.kind.rawValue, $0.subject) < ($1.kind.rawValue, $1.subject) },
            clockSkew: (identity?.transport.clocks.all() ?? []).map { ($0.host, $0.skewSeconds, $0.measuredAt) }
        )
    }

    /// Cheap round trip through the actor, used by the systemd watchdog to prove the broker is not stuck.
    public func ping() -> Bool { true }

    // MARK: Persistence (group commit)

    /// Marks the cache changed and returns once a write that includes the change has finished.
    public func commit() async throws {
        generation += 1
        let mine = generation
        scheduleWrite()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            waiters.append((mine, continuation))
        }
    }

    /// Marks the cache changed without waiting for the write.
    public func changed() {
        generation += 1
        scheduleWrite()
    }

    /// At shutdown: writes what is pending (one attempt, no retries), then closes the database.
    public func flush() async {
        await loaded()  // a partial cache has nothing to write, and the full one is on its way
        stopping = true
        writer?.cancel()  // cuts a retry's backoff short
        if let writer { await writer.value }
        if hasPendingWrites { await writeLoop(delay: false) }
        await store.close()  // checkpoints the write-ahead log: the database file alone is the cache again
    }

    private func scheduleWrite() {
        guard writer == nil, !adopting else { return }
        writer = Task { await self.writeLoop(delay: true) }
    }

    private func writeLoop(delay: Bool) async {
        if delay, writeDelay > .zero { try? await Task.sleep(for: writeDelay) }
        while await writePending(), !stopping {
            // Caught up, every waiter answered: the write-ahead log is folded into the database now rather than
            // inside a commit someone waits for (CacheStore.checkpointIfDue). A commit made while this waited found
            // the writer running and scheduled none: it is written here, whether or not a checkpoint was due.
            await store.checkpointIfDue()
            guard hasPendingWrites else { break }
        }
        writer = nil
    }

    private var hasPendingWrites: Bool { durableGeneration < generation || cache.hasChangedRows }

    /// Writes the changed rows until none is left, retrying failures; false when a failure came while stopping.
    private func writePending() async -> Bool {
        var failures = 0
        while hasPendingWrites {
            let target = generation
            // The rows and their values, taken in one go under the cache's lock; serialized by the store.
            let (rows, values) = cell.withLock { contents in
                let rows = contents.cache.takeChangedRows()
                return (rows, rows.map { contents.cache.value(of: $0) })
            }
            do {
                try await store.write(values)
                writeCount += 1
                lastWriteRows = values.count
                lastWrite = now()
                lastWriteError = nil
                durableGeneration = max(durableGeneration, target)
                resumeWaiters(upTo: target, with: nil)
                failures = 0
            } catch {
                cell.withLock { $0.cache.markChanged(rows) }
                lastWriteError = "\(error)"
                logger.error("cache write failed; retrying", metadata: ["error": "\(error)", "rows": "\(rows.count)"])
                resumeWaiters(upTo: target, with: Failure.notPersisted("\(error)"))
                failures += 1
                if stopping { return false }
                try? await Task.sleep(for: Self.retryDelay(afterFailures: failures))
            }
        }
        return true
    }

    /// Moves the whole cache into the waiting database the key store's key opens (CacheStore.adopt), with no write
    /// running meanwhile: a change made before the move is in it, one made after is written to the new database.
    func adoptWaiting(_ waiting: CacheStore.WaitingCache) async throws {
        adopting = true
        defer {
            adopting = false
            if hasPendingWrites { scheduleWrite() }
        }
        if let writer { await writer.value }
        let target = generation
        let (rows, values) = cell.withLock { contents in
            let rows = contents.cache.allRows()
            _ = contents.cache.takeChangedRows()
            return (rows, rows.map { contents.cache.value(of: $0) })
        }
        do { try await store.adopt(waiting, rows: values) } catch {
            cell.withLock { $0.cache.markChanged(rows) }
            throw error
        }
        durableGeneration = max(durableGeneration, target)
        resumeWaiters(upTo: target, with: nil)
    }

    /// 0.1 s, doubling, at most 30 s.
    static func retryDelay(afterFailures failures: Int) -> Duration {
        .milliseconds(min(100 << min(failures - 1, 9), 30_000))
    }

    private func resumeWaiters(upTo target: Int, with error: Error?) {
        let ready = waiters.filter { $0.generation <= target }
        waiters.removeAll { $0.generation <= target }
        for waiter in ready {
            if let error { waiter.continuation.resume(throwing: error) } else { waiter.continuation.resume() }
        }
    }
}
