import BrokerPlatform
import BrokerCache
import BrokerStore
import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// Databases waiting for their keys. A key store that loses the key (an emptied keyring, another Secret Service
/// provider, a deleted key file) must not cost every app its sign-in: the database it opened stays where it is,
/// untouched, and brokerd serves a new one (`cache-<time>.db`) beside it. When a key that opens it is at hand again
/// (the store's, read afresh, or one the user gives), it is read whole and merged into the cache in use with
/// import's rules, and only then retired.
///
/// The data always ends sealed under the key the store holds, so that the next start opens it: when the store's key
/// is the waiting database's, the merged cache moves into that database (`adopt`) and the one in use is retired.
/// Each step is one transaction or one rename, so a kill -9 anywhere leaves both databases, or the merged one.
extension CacheStore {
    /// A waiting database a key opened, read whole.
    public struct WaitingCache: Sendable {
        public var path: String
        public var cache: TokenCache
        public var problems: [String]
        /// The key is the one the store holds now and not the current database's: the merged cache moves into it.
        public var adopt: Bool
        var key: SymmetricKey
    }

    /// The databases of the directory: `cache.db` first, then each `cache-<time>.db` in the order of their names,
    /// which is the order they were made in. Files set aside (`.unreadable-`, `.given-up-`) are not among them.
    static func databases(besides primary: String) throws -> [String] {
        let directory = AtomicFile.parentDirectory(of: primary)
        let primaryName = String(primary.dropFirst(directory.count + 1))
        let stem = primaryName.hasSuffix(".db") ? String(primaryName.dropLast(3)) : primaryName
        var others: [String] = []
        for name in AtomicFile.names(in: directory) where name.hasPrefix(stem + "-") && name.hasSuffix(".db") {
            let middle = name.dropFirst(stem.count + 1).dropLast(3)
            if !middle.isEmpty, middle.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) {
                others.append(directory + "/" + name)
            }
        }
        return (AtomicFile.exists(primary) ? [primary] : []) + others.sorted()
    }

    /// `cache-<UTC time>.db`, a name no file has.
    static func newDatabasePath(besides primary: String) throws -> String {
        var now = time(nil), parts = tm()
        gmtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let date = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))"
        let stamp = "\(date)T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
        let base = String(primary.dropLast(primary.hasSuffix(".db") ? 3 : 0)) + "-" + stamp
        var candidate = base + ".db", attempt = 1
        while AtomicFile.exists(candidate) {
            attempt += 1
            candidate = "\(base)-\(attempt).db"
        }
        return candidate
    }

    func waitingProblem(_ file: String) -> String {
        if let schema = otherVersions[file] {
            return "cache database \(file) is of schema version \(schema), written by a newer brokerd: it is kept as it is, "
                + "and this brokerd serves a new cache in \(path) meanwhile. That brokerd version can use it again; "
                + "`brokerctl reset` gives it up"
        }
        return "cache database \(file) cannot be opened with the key in \(keyStore.description): it is kept, waiting for its key, "
            + "and brokerd serves a new cache in \(path) meanwhile. Its sign-ins come back when the key does (bring the key "
            + "store back, then `brokerctl recover`, or `brokerctl recover --key-file PATH` with a key you hold); "
            + "`brokerctl reset` gives it up"
    }

    /// Each waiting database that a key at hand opens, read whole: the store's key read afresh, `extraKey` (the user's),
    /// the keys brokerd set aside (`cache.key.superseded-…`, after a switch of key store) and the current key (a merge
    /// interrupted after its database was made). `problems`: what stood in the way.
    /// Also puts the current key into a store that came up empty, so that the next start opens the cache in use.
    public func openWaiting(extraKey: SymmetricKey?) -> (opened: [WaitingCache], problems: [String]) {
        guard let key else { return ([], []) }
        var problems: [String] = []
        var stored: SymmetricKey?
        do {
            stored = try keyStore.storedKey()
            if stored == nil, try keyStore.storeIfEmpty(key) {
                keyNotes.append("\(keyStore.description) held no key; the current cache's key was put there")
            }
        } catch {
            problems.append("the key store could not be read: \(error)")
        }
        let current = Self.bytes(key)
        var candidates: [(SymmetricKey, adopt: Bool)] = []
        // The store's key (the merged cache then moves under it), the user's, those brokerd set aside, the current one.
        let offered: [(SymmetricKey?, Bool)] = [(stored, true), (extraKey, false)] + keyStore.supersededKeys().map { ($0, false) }
            + [(key, false)]
        for (candidate, adopt) in offered {
            guard let candidate, !candidates.contains(where: { Self.bytes($0.0) == Self.bytes(candidate) }) else { continue }
            candidates.append((candidate, adopt && Self.bytes(candidate) != current))
        }
        var opened: [WaitingCache] = []
        for file in waiting where otherVersions[file] == nil {
            for (candidate, adopt) in candidates {
                do {
                    let database = try CacheDatabase(path: file, key: candidate)
                    defer { database.close() }
                    var assembler = CacheAssembler(), rowProblems: [String] = []
                    rowProblems += try database.forEachRow { assembler.add($0, problems: &rowProblems) }
                    opened.append(WaitingCache(path: file, cache: assembler.finish(), problems: rowProblems, adopt: adopt, key: candidate))
                    break
                } catch CacheDatabase.Failure.wrongKey {
                    continue
                } catch {
                    problems.append("cache database \(file) could not be read: \(error)")
                    break
                }
            }
        }
        return (opened, problems)
    }

    /// The merged cache (every row, `rows`) moves into the waiting database `opened`, which the store's key opens, in
    /// one transaction; then that database is the one in use and the one used before is retired.
    func adopt(_ opened: WaitingCache, rows: [CacheRowValue]) throws {
        let target = try CacheDatabase(path: opened.path, key: opened.key, accountOfRow: Self.account(ofSection:body:))
        do { try target.apply(rows.map(Self.change)) } catch {
            target.close()
            throw error
        }
        let previous = path
        database?.close()
        database = target
        key = opened.key
        path = opened.path
        readOnlyReason = nil
        waiting.removeAll { $0 == opened.path }
        try Self.remove(previous)
    }

    /// A waiting database whose rows are now in the cache in use (its merge is durable) is deleted with its companions.
    func retire(_ file: String) throws {
        waiting.removeAll { $0 == file }
        try Self.remove(file)
    }

    /// `brokerctl reset`: every waiting database is renamed `<name>.given-up-<time>` (kept, so that a key found later
    /// can still open it with `recover --key-file ... --database ...`) and no longer waited for. Returns the new names.
    public func giveUpWaiting() throws -> [String] {
        var kept: [String] = []
        for file in waiting {
            kept.append(try CacheDatabase.moveAside(file, reason: "given-up"))
            waiting.removeAll { $0 == file }
            otherVersions[file] = nil
        }
        return kept
    }

    /// Waits for a given-up database again (it is renamed back to a database name), so that `openWaiting` tries it.
    public func waitFor(_ file: String) throws -> String {
        guard AtomicFile.exists(file) else { throw FileError(operation: "open", path: file, code: ENOENT) }
        if (try Self.databases(besides: primaryPath)).contains(file) {
            if file != path, !waiting.contains(file) { waiting.append(file) }
            return file
        }
        let name = try Self.newDatabasePath(besides: primaryPath)
        for suffix in [""] + CacheDatabase.companionSuffixes where AtomicFile.exists(file + suffix) {
            if rename(file + suffix, name + suffix) != 0 { throw FileError(operation: "rename", path: file + suffix, code: errno) }
        }
        try AtomicFile.syncDirectory(AtomicFile.parentDirectory(of: name))
        waiting.append(name)
        return name
    }

    private static func remove(_ file: String) throws {
        for suffix in [""] + CacheDatabase.companionSuffixes {
            if unlink(file + suffix) != 0, errno != ENOENT { throw FileError(operation: "unlink", path: file + suffix, code: errno) }
        }
        try AtomicFile.syncDirectory(AtomicFile.parentDirectory(of: file))
    }

    private static func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }
}
