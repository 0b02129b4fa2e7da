import BrokerCache
import Crypto

/// The broker's side of the databases waiting for their keys (CacheStore's WaitingCaches.swift): shown in status
/// until merged or given up, merged back with import's rules whenever a key that opens one may be at hand again
/// (start, SIGHUP, `brokerctl recover`).
extension Broker {
    public struct Recovery: Sendable {
        /// Each database merged, and what its merge added, replaced and kept.
        public var merged: [(file: String, report: ImportReport)] = []
        /// Databases still waiting.
        public var waiting: [String] = []
        /// What stood in the way (a key store that cannot be read, a database that cannot be read).
        public var problems: [String] = []
    }

    /// Databases waiting for their keys, as status shows them.
    public func waitingDatabases() -> [String] { waitingCaches }

    func refreshWaiting() async {
        cacheFile = await store.path
        waitingCaches = await store.waiting
        var problems: [String] = []
        for file in waitingCaches { problems.append(await store.waitingProblem(file)) }
        waitingProblems = problems
    }

    func logWaiting() {
        for problem in waitingProblems { logger.error("\(problem)") }
    }

    /// Tries every waiting database with the key store's key (read afresh) and `key` (one the user holds), and merges
    /// each that opens into the cache with import's rules (newer entries win; nothing of the cache in use is lost).
    /// `database`: a file to wait for first (a database given up with `reset`, or one from elsewhere).
    /// One runs at a time: a call made meanwhile (a burst of bus signals, SIGHUP) waits for it, then runs.
    public func recoverWaitingCaches(key: [UInt8]? = nil, database: String? = nil) async throws -> Recovery {
        if let key, key.count != 32 { throw Failure.invalidKey(bytes: key.count) }
        while let running = recovery { _ = try? await running.value }
        let task = Task { try await self.recover(key: key, database: database) }
        recovery = task
        defer { recovery = nil }
        return try await task.value
    }

    private func recover(key: [UInt8]?, database: String?) async throws -> Recovery {
        await loaded()
        if let database { _ = try await store.waitFor(database) }
        let notesBefore = await store.keyNotes.count
        let (opened, problems) = await store.openWaiting(extraKey: key.map { SymmetricKey(data: $0) })
        for note in await store.keyNotes.dropFirst(notesBefore) { logger.notice("key store: \(note)") }
        var recovery = Recovery(problems: problems)
        for problem in problems { logger.error("\(problem)") }
        for waiting in opened {
            logger.info("merging a cache that waited for its key", metadata: ["file": "\(waiting.path)"])
            let report = try await importDocument(waiting.cache.document)
            if waiting.adopt { try await adoptWaiting(waiting) } else { try await store.retire(waiting.path) }
            let inUse = await store.path
            logger.notice("a cache that waited for its key was merged", metadata: [
                "file": "\(waiting.path)", "added": "\(report.added)", "replaced": "\(report.replaced)",
                "kept_newer": "\(report.keptNewer)", "now_in": "\(inUse)",
            ])
            for problem in waiting.problems { logger.error("\(problem)") }
            recovery.merged.append((waiting.path, report))
        }
        await refreshWaiting()
        recovery.waiting = waitingCaches
        if !opened.isEmpty { emit(.statusChanged) }
        return recovery
    }

    /// `brokerctl reset`: the waiting databases are given up (kept as `<name>.given-up-<time>`). Returns those names.
    public func giveUpWaitingCaches() async throws -> [String] {
        let kept = try await store.giveUpWaiting()
        await refreshWaiting()
        for file in kept { logger.notice("a cache waiting for its key was given up", metadata: ["kept_as": "\(file)"]) }
        if !kept.isEmpty { emit(.statusChanged) }
        return kept
    }
}
