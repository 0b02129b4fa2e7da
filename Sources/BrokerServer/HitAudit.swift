import BrokerCore

/// One connection's count of the cache hits it answers on its own thread, for the audit: hits of the same request
/// (same client ID, account and scopes) are counted together and handed to the audit as one row with their count when
/// another request comes, when `window` seconds have passed, or when the connection closes. A repeated hit costs a
/// comparison and an increment; every hit is counted.
struct HitAudit {
    struct Subject: Equatable, Sendable {
        var clientId: String
        var homeAccountId: String
        var username: String?
        var scopes: [String]
    }

    static let window: Int64 = 10

    private var subject: Subject?
    /// The remembered answer (`SilentAnswerMemo`) whose subject is being counted; 0 for none.
    private var number = 0
    private var count = 0
    private var first: Int64 = 0
    private var last: Int64 = 0

    /// Counts a hit of the remembered answer `number` if it is the one being counted and the window is open: the
    /// whole cost of a repeated hit. False: `start` a new tally.
    mutating func countRepeat(number: Int, at now: Int64) -> Bool {
        guard number != 0, number == self.number, now - first < Self.window else { return false }
        count += 1
        last = now
        return true
    }

    /// Counts a hit answered without a remembered answer (or with one of another number) if its subject is the one
    /// being counted and the window is open.
    mutating func countRepeat(_ subject: Subject, number: Int, at now: Int64) -> Bool {
        guard subject == self.subject, now - first < Self.window else { return false }
        count += 1
        last = now
        self.number = number
        return true
    }

    /// Starts a tally with this hit; returns the one it replaces, to hand over.
    mutating func start(_ subject: Subject, number: Int, at now: Int64) -> Finished? {
        let finished = take()
        self.subject = subject
        self.number = number
        count = 1
        first = now
        last = now
        return finished
    }

    struct Finished {
        var subject: Subject
        var count: Int
        var first: Int64
        var last: Int64
    }

    /// The tally so far, if any, leaving it empty.
    mutating func take() -> Finished? {
        defer {
            subject = nil
            number = 0
            count = 0
        }
        guard let subject, count > 0 else { return nil }
        return Finished(subject: subject, count: count, first: first, last: last)
    }

    /// When the window of the tally ends (Unix seconds); nil when there is nothing to hand over.
    var due: Int64? { count > 0 ? first + Self.window : nil }
}

extension AppAccess {
    /// Hands a connection's counted cache hits to the audit.
    nonisolated func record(_ finished: HitAudit.Finished, caller: CallerIdentity) {
        let subject = finished.subject
        record(caller, frontEnd: "socket", clientId: subject.clientId, scopes: subject.scopes, homeAccountId: subject.homeAccountId,
               username: subject.username, outcome: "cache", count: finished.count, since: finished.first)
    }
}
