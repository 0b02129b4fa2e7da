import BrokerJSON
import BrokerStore

/// One caller's count of the cache hits a front end answers without a task (a socket connection's, on its thread; a
/// D-Bus sender's, on the bus thread), for the audit: hits of the same request (same client ID, account and scopes)
/// are counted together, and every count is handed to the audit as one row when `window` seconds have passed since
/// the first, or when the caller goes (the connection closes, the unique name leaves the bus). An app that alternates
/// a few requests (a Graph token and an ARM token) still makes a few rows a window, not one a hit. A repeated hit
/// costs a comparison and an increment; every hit is counted.
public struct HitAudit {
    public struct Subject: Hashable, Sendable {
        public let clientId: String
        public let homeAccountId: String
        public let username: String?
        public let scopes: [String]
        /// By `ByteDigest`, worked out once (a connection's own requests, at most `capacity` a window): SipHash over
        /// the subject's two hundred bytes was a third of counting a hit, and the digest made again at each growth
        /// of the table, for every subject in it, was a quarter of what was left.
        let digest: UInt64

        public init(clientId: String, homeAccountId: String, username: String?, scopes: [String]) {
            self.clientId = clientId
            self.homeAccountId = homeAccountId
            self.username = username
            self.scopes = scopes
            var digest = ByteDigest.of(clientId) ^ ByteDigest.of(homeAccountId) &* 3
            if let username { digest ^= ByteDigest.of(username) &* 5 }
            for scope in scopes { digest = (digest ^ ByteDigest.of(scope)) &* 0x9E37_79B9_7F4A_7C15 }
            self.digest = digest ^ UInt64(scopes.count)
        }

        public func hash(into hasher: inout Hasher) { hasher.combine(digest) }
        public func _rawHashValue(seed: Int) -> Int { ByteDigest.tableHash(digest, seed: seed) }

        public static func == (a: Subject, b: Subject) -> Bool {
            a.digest == b.digest && a.clientId == b.clientId && a.homeAccountId == b.homeAccountId
                && a.username == b.username && a.scopes == b.scopes
        }
    }

    public struct Tally: Sendable {
        public var subject: Subject
        /// The remembered answer (`SilentAnswerMemo`) counted here; 0 for hits answered without one.
        public var number: Int
        public var count: Int
        public var first: Int64
        public var last: Int64
    }

    public static let window: Int64 = 10
    /// Distinct requests counted in one window at most; past that, the window ends early (and the audit's queue
    /// merges what connections hand over alike). A window that ends early hands a row to the audit per hit, which
    /// costs more than the hit itself (a tenth of it went to the audit at 256), so the bound is set where a memory
    /// cap is needed, not lower: a tally holds its request's strings, most of them shared with the cache, about
    /// 200 bytes, so a connection that asks for thousands of different tokens a window holds under a megabyte.
    public static let capacity = 4096
    /// Tables of this many tallies are kept from one window to the next; past it, they are made room for up to
    /// `capacity` at once, not grown by doubling.
    static let keptCapacity = 64

    private var tallies: [Tally] = []
    /// Where each subject's tally is, by the subject's digest: a hit that no memo answered finds its tally without
    /// comparing every subject. By the digest, not the subject: a table of subjects held a second copy of each (four
    /// references, 70 bytes a slot), and a connection that asks for thousands of different tokens a window grew it
    /// and missed in it on every hit (its growth alone was 1.5 last-level misses a hit). Two subjects of one digest
    /// take the next free key (`slot`).
    private var indexes: [UInt64: Int] = [:]
    /// Where the tally of each remembered answer is, by its number: a repeat of another answer than the last one
    /// finds its tally without scanning them all (thousands, for a caller that asks for many tokens).
    private var numberIndexes: [Int: Int] = [:]
    /// The tally counted last: where a repeated hit looks first.
    private var lastIndex = 0
    private var windowStart: Int64 = 0

    public init() {}

    /// Counts a hit of the remembered answer `number` when the window is open and it has a tally: the whole cost of a
    /// repeated hit. False: `add` the hit.
    public mutating func countRepeat(number: Int, at now: Int64) -> Bool {
        guard number != 0, now - windowStart < Self.window else { return false }
        if lastIndex < tallies.count, tallies[lastIndex].number == number {
            tallies[lastIndex].count += 1
            tallies[lastIndex].last = now
            return true
        }
        guard let index = numberIndexes[number] else { return false }
        lastIndex = index
        tallies[index].count += 1
        tallies[index].last = now
        return true
    }

    /// Counts a hit by its subject (a new remembered answer, or one answered without a memo). Returns the tallies
    /// of the window it closed, if it closed one, to hand over.
    public mutating func add(_ subject: Subject, number: Int, at now: Int64) -> [Tally] {
        var finished: [Tally] = []
        if now - windowStart >= Self.window || tallies.count >= Self.capacity {
            finished = take()
            windowStart = now
        }
        let (key, found) = slot(of: subject)
        if let index = found {
            tallies[index].count += 1
            tallies[index].last = now
            if number != 0 { tallies[index].number = number }
            lastIndex = index
        } else {
            if tallies.count == Self.keptCapacity {
                tallies.reserveCapacity(Self.capacity)
                indexes.reserveCapacity(Self.capacity)
            }
            tallies.append(Tally(subject: subject, number: number, count: 1, first: now, last: now))
            lastIndex = tallies.count - 1
            indexes[key] = lastIndex
        }
        if number != 0 { numberIndexes[number] = lastIndex }
        return finished
    }

    /// The subject's key in `indexes` and its tally, if it has one; else the free key to file it under.
    private func slot(of subject: Subject) -> (key: UInt64, index: Int?) {
        var key = subject.digest
        while let index = indexes[key] {
            if tallies[index].subject == subject { return (key, index) }
            key &+= 0x9E37_79B9_7F4A_7C15
        }
        return (key, nil)
    }

    /// Every tally so far, leaving none.
    public mutating func take() -> [Tally] {
        let keepingCapacity = tallies.count <= Self.keptCapacity  // a burst of many subjects is not kept for ever
        defer {
            tallies.removeAll(keepingCapacity: keepingCapacity)
            indexes.removeAll(keepingCapacity: keepingCapacity)
            numberIndexes.removeAll(keepingCapacity: keepingCapacity)
            lastIndex = 0
        }
        return tallies
    }

    /// When the window with tallies in it ends (Unix seconds); nil when there is nothing to hand over.
    public var due: Int64? { tallies.isEmpty ? nil : windowStart + Self.window }
}

extension AppAccess {
    /// Hands a caller's counted cache hits to the audit.
    public nonisolated func record(_ tallies: [HitAudit.Tally], caller: CallerIdentity, frontEnd: String) {
        record(tallies.map { tally in
            let subject = tally.subject
            return auditRow(caller, frontEnd: frontEnd, clientId: subject.clientId, scopes: subject.scopes,
                            homeAccountId: subject.homeAccountId, username: subject.username, outcome: "cache",
                            count: tally.count, since: tally.first, until: tally.last)
        }, of: caller)
    }
}
