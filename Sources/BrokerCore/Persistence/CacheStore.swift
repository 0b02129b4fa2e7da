import BrokerPlatform
import BrokerCache
import BrokerJSON
import BrokerStore
import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// The cache on disk: an SQLite database (`cache.db`) with one row per entry and every secret sealed with
/// AES-256-GCM under the key store's key (BrokerStore). A write is one transaction of the rows a change touched,
/// durable when it returns. Runs off the broker actor, so a write's fsync never holds up a request.
///
/// A database the key does not open is never moved or replaced: it waits for its key (WaitingCaches.swift) while
/// brokerd serves a new database beside it. A file that is not a database at all is moved aside and reported; an
/// old `cache.bin` (the whole cache in one sealed file) is migrated once and kept as `cache.bin.migrated-<time>`.
public actor CacheStore {
    /// The database in use: `cache.db`, or `cache-<time>.db` when another database waits for its key.
    public internal(set) var path: String
    /// `cache.db`: the database's name when no other waits.
    public let primaryPath: String
    /// Databases kept for a key the store does not hold now (the key store changed or lost it), oldest first.
    public internal(set) var waiting: [String] = []
    /// Waiting databases of a schema this version cannot read, by file: no key opens them here.
    var otherVersions: [String: Int64] = [:]
    public let keyStore: KeyStore
    /// Why this key store is in use (the config's choice, or what `auto` found), for status.
    public let keyStoreReason: String?
    /// A vault the key moves out of, into the key file (the file store chosen while the Secret Service holds it).
    private let formerVault: (any KeyVault)?
    /// What happened to the key at `open` (a move between stores), for the log; never the key itself.
    public internal(set) var keyNotes: [String] = []
    var database: CacheDatabase?
    var key: SymmetricKey?
    /// Set while the database is open read-only because its directory cannot be written (a read-only mount):
    /// changes stay in memory, and each write first tries to open it for writing again.
    public internal(set) var readOnlyReason: String?

    public struct Loaded: Sendable {
        public var cache: TokenCache
        /// Files that could not be used (moved aside) and entries that could not be read.
        public var problems: [String]
    }

    /// `path` is the database; the old single-file cache, if any, is `cache.bin` beside it.
    public init(path: String, keyStore: KeyStore, reason: String? = nil, leaving formerVault: (any KeyVault)? = nil) {
        self.path = path
        self.primaryPath = path
        self.keyStore = keyStore
        self.keyStoreReason = reason
        self.formerVault = formerVault
    }

    public var persists: Bool { keyStore != .memory }
    var legacyPath: String { AtomicFile.parentDirectory(of: path) + "/cache.bin" }

    /// What `open` found.
    public enum Opened: Sendable {
        /// The whole cache is here already (no key store, a new or unusable file, a migrated `cache.bin`).
        case loaded(Loaded)
        /// The database is open and its rows are still to be read with `loadAll`. Meanwhile `reader` (when asked
        /// for) reads single accounts: brokerd answers cache hits while the rest loads. `problems`: files moved aside.
        case stored(problems: [String], reader: AccountRowReader?)
    }

    /// The whole cache: `open`, then `loadAll` when the database was there.
    public func load() throws -> Loaded {
        switch try open(withReader: false) {
        case .loaded(let loaded):
            return loaded
        case .stored(let problems, _):
            var loaded = try loadAll()
            loaded.problems.insert(contentsOf: problems, at: 0)
            return loaded
        }
    }

    /// Opens the database without reading its rows (cheap at any size). Of the databases in the directory, the first
    /// the key opens is used; the others wait for their keys. `withReader`: also open a second connection for reading
    /// single accounts while `loadAll` runs.
    public func open(withReader: Bool = true) throws -> Opened {
        guard let (key, created) = try keyStore.loadKey(leaving: formerVault, database: primaryPath, notes: &keyNotes) else {
            return .loaded(Loaded(cache: TokenCache(), problems: []))
        }
        try AtomicFile.makeDirectory(AtomicFile.parentDirectory(of: primaryPath))
        self.key = key
        var problems: [String] = []
        for candidate in try Self.databases(besides: primaryPath) {
            if created || database != nil {
                // A new key opens nothing; a second database the key opens is an interrupted merge, finished by `recover`.
                waiting.append(candidate)
                continue
            }
            do {
                database = try CacheDatabase(path: candidate, key: key, accountOfRow: Self.account(ofSection:body:))
                path = candidate
            } catch CacheDatabase.Failure.sqlite(let error) where !Self.writable(candidate) {
                database = try CacheDatabase(readOnlySnapshotOf: candidate, key: key)
                path = candidate
                readOnlyReason = "cache database \(candidate) cannot be written (\(error.message)): it was opened read-only; "
                    + "changes are kept in memory and written as soon as it can be written again"
                problems.append(readOnlyReason!)
            } catch CacheDatabase.Failure.wrongKey {
                waiting.append(candidate)
            } catch CacheDatabase.Failure.otherVersion(_, let schema) {
                // A newer brokerd's database (a downgrade): kept as it is, for that version or `reset`.
                waiting.append(candidate)
                otherVersions[candidate] = schema
            } catch CacheDatabase.Failure.notADatabase(_, let detail) {
                problems.append(try moveAside(candidate, because: "it is not a cache database (\(detail))"))
            }
        }
        if database != nil {
            let reader = withReader && readOnlyReason == nil ? try AccountRowReader(path: path, key: key) : nil
            return .stored(problems: problems, reader: reader)
        }
        path = AtomicFile.exists(primaryPath) ? try Self.newDatabasePath(besides: primaryPath) : primaryPath
        database = try CacheDatabase(path: path, key: key, accountOfRow: Self.account(ofSection:body:))
        if let migrated = try migrateLegacyFile(key: key, keyCreated: created, problems: &problems) {
            return .loaded(Loaded(cache: migrated, problems: problems))
        }
        return .loaded(Loaded(cache: TokenCache(), problems: problems))
    }

    /// Every row of the database opened by `open`, streamed into the cache.
    public func loadAll() throws -> Loaded {
        try loadAll(inTwoPartsFrom: sysconf(Int32(_SC_NPROCESSORS_ONLN)) > 1 ? Self.twoPartLoadRows : .max)
    }

    /// From this many rows (their rowids' span), a load on a machine of several cores reads the second half of the
    /// rows on a thread and a connection of their own while this one reads the first: opening secrets and parsing
    /// entries is most of a load, 1.5-2.6 s for 100,000 tokens on one core of the bench machine. A smaller cache is
    /// not worth a thread.
    static let twoPartLoadRows = 10_000

    /// `loadAll`, in two parts from `minimumRows` rows.
    func loadAll(inTwoPartsFrom minimumRows: Int) throws -> Loaded {
        guard let database else { return Loaded(cache: TokenCache(), problems: []) }
        var problems: [String] = []
        var secondPart: JoinableThread<Swift.Result<(CacheAssembler, [String]), any Error>>?
        var firstRows: ClosedRange<Int64>?, secondRows: ClosedRange<Int64>?
        // The rowids' span stands for the row count (never fewer rows than it), so that the second half starts
        // reading before this thread counts the sections, which reads the whole primary key's index.
        if let key, let rowids = try database.rowidBounds(), rowids.lowerBound < rowids.upperBound,
           rowids.upperBound &- rowids.lowerBound >= Int64(minimumRows) - 1 {
            let middle = rowids.lowerBound + (rowids.upperBound - rowids.lowerBound) / 2
            let (first, second) = (rowids.lowerBound...middle, (middle + 1)...rowids.upperBound)
            let path = self.path
            secondPart = JoinableThread.start {
                Swift.Result {
                    let reader = try CacheDatabase(path: path, key: key)
                    defer { reader.close() }
                    var part = CacheAssembler(), problems: [String] = []
                    let unopened = try reader.forEachRow(rowids: second) { part.add($0, problems: &problems) }
                    return (part, problems + unopened)
                }
            }
            if secondPart != nil { (firstRows, secondRows) = (first, second) }
        }
        var assembler = CacheAssembler(expecting: (try? database.sectionCounts()) ?? [:])
        let firstPart = Swift.Result { () throws -> [String] in
            if let firstRows { return try database.forEachRow(rowids: firstRows) { assembler.add($0, problems: &problems) } }
            return try database.forEachRow { assembler.add($0, problems: &problems) }
        }
        // Joined before anything is thrown: the thread is never left running.
        let second = secondPart?.join()
        var unopened = try firstPart.get()
        switch second {
        case .success(let (part, partProblems))?:
            assembler.absorb(part)
            unopened += partProblems
        case .failure?:
            // The second connection could not be opened or read: this one reads its half.
            unopened += try database.forEachRow(rowids: secondRows!) { assembler.add($0, problems: &problems) }
        case nil:
            break
        }
        return Loaded(cache: assembler.finish(), problems: problems + unopened)
    }

    /// Persists the rows in one transaction; on failure nothing of it is applied.
    public func write(_ values: [CacheRowValue]) throws {
        guard var database else { return }
        if database.isReadOnly, let key {
            do {
                database = try CacheDatabase(path: path, key: key, accountOfRow: Self.account(ofSection:body:))
            } catch {
                throw CacheDatabase.Failure.readOnly(path: path)
            }
            self.database?.close()
            self.database = database
            readOnlyReason = nil
        }
        try database.apply(values.map(Self.change))
        rowsSinceCheckpoint += values.count
    }

    /// Rows written since the write-ahead log was last folded into the database (`checkpointIfDue`).
    private var rowsSinceCheckpoint = 0
    /// About 4 MiB of rows: what SQLite's own checkpoint waits for (1,000 pages, 16 MiB here) in a quarter.
    static let checkpointRows = 2_000

    /// Folds the write-ahead log into the database when enough rows went into it, for the writer to call once it has
    /// caught up (nobody waits on it then). Returns whether it did.
    @discardableResult
    public func checkpointIfDue() -> Bool {
        guard rowsSinceCheckpoint >= Self.checkpointRows, let database else { return false }
        rowsSinceCheckpoint = 0
        try? database.checkpoint()
        return true
    }

    /// Whether this process may write the database and create its companions beside it.
    static func writable(_ path: String) -> Bool {
        access(AtomicFile.parentDirectory(of: path), W_OK) == 0 && access(path, W_OK) == 0
    }

    public func close() {
        database?.close()
        database = nil
    }

    private func moveAside(_ file: String, because reason: String) throws -> String {
        let aside = try CacheDatabase.moveAside(file, reason: "unreadable")
        return "cache database \(file) could not be used because \(reason); it was moved to \(aside)"
    }

    /// The old whole-file cache, written into the database once; the file stays as a backup.
    private func migrateLegacyFile(key: SymmetricKey, keyCreated: Bool, problems: inout [String]) throws -> TokenCache? {
        guard let sealed = try AtomicFile.read(legacyPath) else { return nil }
        let document: CacheDocument
        do throws(LegacyCacheFile.Failure) {
            if keyCreated { throw .keyWasMissing }
            document = try LegacyCacheFile.read(sealed, key: key)
        } catch {
            let reason: String
            switch error {
            case .keyWasMissing: reason = "the key file was missing (a new key was made)"
            case .cannotDecrypt: reason = "it cannot be decrypted with the key"
            case .notADocument(let why): reason = "its content is not a cache document (\(why))"
            }
            let aside = try AtomicFile.moveAside(legacyPath, reason: "unreadable")
            problems.append("cache file \(legacyPath) could not be used because \(reason); it was moved to \(aside)")
            return nil
        }
        let cache = TokenCache(document: document)
        try write(cache.allRows().map(cache.value(of:)))
        _ = try AtomicFile.moveAside(legacyPath, reason: "migrated")
        return cache
    }

    // MARK: Rows

    /// Sections of the database besides the five of the unified cache.
    enum Section {
        static let opaquePrefix = "opaque:"
        static let document = "document"
        static let use = "brokerd.use"
        static let state = "brokerd"
        static let learned = "brokerd.learned"
    }

    /// How rows name their account in the database: as the cache's index does (TokenCache.addToIndex).
    static func account(of homeAccountId: String) -> String { homeAccountId.lowercased() }

    /// The account of a row stored without one (an older database), from its body.
    static func account(ofSection section: String, body: [UInt8]) -> String? {
        guard CredentialKind(rawValue: section) != nil,
              let hid = (try? CacheDocument.entity(from: body))?.homeAccountId else { return nil }
        return account(of: hid)
    }

    static func change(_ value: CacheRowValue) -> RowChange {
        func put(_ section: String, _ key: String, _ body: [UInt8], secret: [UInt8]? = nil) -> RowChange {
            .put(StoredRow(section: section, key: key, body: body, secret: secret))
        }
        switch value {
        case .entry(let kind, let key, let entity):
            guard let entity else { return .delete(section: kind.sectionName, key: key) }
            let (body, secret) = entity.storedForm()
            return .put(StoredRow(section: kind.sectionName, key: key, body: body, secret: secret,
                                  account: entity.homeAccountId.map(Self.account(of:))))
        case .opaque(let kind, let key, let json):
            guard let json else { return .delete(section: Section.opaquePrefix + kind.sectionName, key: key) }
            return put(Section.opaquePrefix + kind.sectionName, key, Array(json.utf8))
        case .section(let name, let json):
            guard let json else { return .delete(section: Section.document, key: name) }
            return put(Section.document, name, Array(json.utf8))
        case .use(let key, let use):
            guard let use else { return .delete(section: Section.use, key: key) }
            return put(Section.use, key, JSONWriter().bytes(use.json))
        case .state(let json):
            return put(Section.state, "state", Array(json.utf8))
        case .learned(let key, let fact):
            guard let fact else { return .delete(section: Section.learned, key: key) }
            return put(Section.learned, key, Array(fact.json.utf8))
        }
    }
}

/// Builds the cache from database rows one at a time (`CacheDatabase.forEachRow`), so that loading never holds the
/// rows and the cache at once.
struct CacheAssembler: Sendable {
    private var document = CacheDocument()
    /// The values its entries repeat, held once (`SharedValues`); dropped with the assembler.
    private var shared = SharedValues()
    private var state: BrokerState?
    private var uses: [String: TokenUse] = [:]
    private var learned = NetworkMemory()

    /// `counts`: rows per section, to size the tables once instead of growing them row by row.
    init(expecting counts: [String: Int] = [:]) {
        for kind in CredentialKind.allCases {
            if let count = counts[kind.rawValue], count > 0 { document.entries[kind] = Dictionary(minimumCapacity: count) }
        }
        if let count = counts[CacheStore.Section.use], count > 0 { uses.reserveCapacity(count) }
    }

    mutating func add(_ row: StoredRow, problems: inout [String]) {
        typealias Section = CacheStore.Section
        if let kind = CredentialKind(rawValue: row.section) {
            do {
                var entity = try CacheDocument.entity(from: row.body, sharing: &shared)
                if let secret = row.secret { entity[field: "secret"] = .string(String(decoding: secret, as: UTF8.self)) }
                document.entries[kind, default: [:]][row.key] = entity
            } catch {
                problems.append("cache entry \(row.section)/\(row.key) could not be read (\(error)); it was left out")
            }
        } else if row.section.hasPrefix(Section.opaquePrefix),
                  let kind = CredentialKind(rawValue: String(row.section.dropFirst(Section.opaquePrefix.count))) {
            document.opaqueEntries[kind, default: [:]][row.key] = String(decoding: row.body, as: UTF8.self)
        } else if row.section == Section.document {
            document.otherSections.append((row.key, String(decoding: row.body, as: UTF8.self)))
        } else if row.section == Section.use {
            if let json = try? JSONReader.parse(row.body), let use = TokenUse(json: json) { uses[row.key] = use }
        } else if row.section == Section.state {
            state = BrokerState(json: String(decoding: row.body, as: UTF8.self))
        } else if row.section == Section.learned {
            if let fact = NetworkMemory.Fact(json: row.body) { learned.set(key: row.key, fact) }
        }
    }

    /// Takes in the rows another assembler read (another part of the same table: no row is in both).
    mutating func absorb(_ other: consuming CacheAssembler) {
        for (kind, entries) in other.document.entries {
            document.entries[kind, default: [:]].merge(entries) { mine, _ in mine }
        }
        for (kind, entries) in other.document.opaqueEntries {
            document.opaqueEntries[kind, default: [:]].merge(entries) { mine, _ in mine }
        }
        document.otherSections += other.document.otherSections
        uses.merge(other.uses) { mine, _ in mine }
        for (key, fact) in other.learned.facts { learned.set(key: key, fact) }
        if let theirs = other.state { state = theirs }
    }

    consuming func finish() -> TokenCache {
        var state = state ?? BrokerState()
        state.uses = uses
        let document = document
        guard document.entityCount >= CacheStore.twoPartLoadRows else {
            return TokenCache(document: document, state: state, learned: learned)
        }
        // The keys by account, and the id tokens' usernames, on a thread of their own while this one files the tokens.
        let keys = JoinableThread.start { EntryKeys(document, withUsernames: true) }
        return TokenCache(document: document, state: state, learned: learned) {
            keys?.join() ?? EntryKeys(document, withUsernames: true)
        }
    }
}
