import BrokerPlatform
import Logging

/// The request log: one line per request (method, caller pid and executable, duration, outcome), except that a
/// request identical to one written less than `window` ago (same method, outcome, pid and executable) is counted
/// instead, and the count is written as one line (`repeated=N`) when that window ends. An app that asks for the
/// same cached token thousands of times a second would otherwise pay a formatted log write for every hit (measured:
/// a fifth to a third of the 64-client rate at the default level), and journald would drop the excess anyway (its
/// default rate limit). This way every request is still accounted for, with its caller.
final class RequestLog: Sendable {
    struct Key: Hashable, Sendable {
        var method: String
        var outcome: String
        var pid: Int32
        var executable: String?

        /// The pid and the method tell requests apart well enough for a table of a few entries; the executable's
        /// path (as long as the rest together) and the outcome are left to ==.
        func hash(into hasher: inout Hasher) {
            hasher.combine(pid)
            hasher.combine(method)
        }
    }

    struct Tally {
        var opened: ContinuousClock.Instant
        var repeated = 0
        var slowestMicros: Int64 = 0
    }

    private struct State {
        var tallies: [Key: Tally] = [:]
        var sweepScheduled = false
    }

    private let logger: Logger
    let window: Duration
    let windowNanoseconds: UInt64
    private let state = Locked(State())

    init(logger: Logger, window: Duration = .seconds(10)) {
        self.logger = logger
        self.window = window
        windowNanoseconds = UInt64(window.components.seconds) * 1_000_000_000
            + UInt64(window.components.attoseconds / 1_000_000_000)
    }

    func record(_ key: Key, micros: Int64) {
        guard logger.logLevel <= .info else { return }
        let now = ContinuousClock.now
        let window = self.window
        let (counted, earlier, scheduleSweep) = state.withLock { state -> (Bool, Tally?, Bool) in
            let schedule = !state.sweepScheduled
            state.sweepScheduled = true
            if let index = state.tallies.index(forKey: key), now - state.tallies.values[index].opened < window {
                state.tallies.values[index].repeated += 1
                state.tallies.values[index].slowestMicros = max(state.tallies.values[index].slowestMicros, micros)
                return (true, nil, schedule)
            }
            let earlier = state.tallies.updateValue(Tally(opened: now), forKey: key)
            return (false, earlier, schedule)
        }
        if let earlier, earlier.repeated > 0 { writeRepeats(key, earlier) }
        if !counted { write(key, micros: micros) }
        if scheduleSweep { scheduleNextSweep() }
    }

    /// Adds repeats counted elsewhere (`Local`) to the open window of `key`, or writes them if it has ended.
    func add(_ counted: Tally, for key: Key) {
        let now = ContinuousClock.now
        let window = self.window
        let added = state.withLock { state -> Bool in
            guard let index = state.tallies.index(forKey: key), now - state.tallies.values[index].opened < window else {
                return false
            }
            state.tallies.values[index].repeated += counted.repeated
            state.tallies.values[index].slowestMicros = max(state.tallies.values[index].slowestMicros, counted.slowestMicros)
            return true
        }
        if !added { writeRepeats(key, counted) }
    }

    /// One connection's tally of the cache hits it answers on its own thread (`RequestRouter.logHit`): the first
    /// of a window goes to the shared log like any request; the repeats are counted here, and handed to the shared
    /// log when the window ends (`handOver`, which the connection calls then even if idle, and when it closes).
    /// A connection has one peer and these are all successful silent requests, so one key. Times are monotonic
    /// nanoseconds (`Threads.nowNanoseconds`): this runs on every hit.
    struct Local {
        private var key: Key? {
            didSet { holdsKey = key != nil }
        }
        private var holdsKey = false  // key != nil, without copying the key on every hit
        private var opened: UInt64 = 0
        private var repeated = 0
        private var slowestMicros: Int64 = 0

        mutating func record(_ key: Key, micros: Int64, at now: UInt64, into log: RequestLog) {
            if self.key == key, countRepeat(micros: micros, at: now, window: log.windowNanoseconds) { return }
            handOver(into: log)
            self.key = key
            opened = now
            log.record(key, micros: micros)
        }

        /// Counts a hit as a repeat of the key this tally holds if its window is still open; false when the hit must
        /// be recorded (`record`). Every hit a connection answers has the same key, so it need not be made for this.
        mutating func countRepeat(micros: Int64, at now: UInt64, window: UInt64) -> Bool {
            guard holdsKey, now &- opened < window else { return false }
            repeated += 1
            slowestMicros = max(slowestMicros, micros)
            return true
        }

        /// When the window with repeats in it ends (monotonic nanoseconds); nil when there are none to hand over.
        func handOverDue(window: UInt64) -> UInt64? {
            repeated > 0 ? opened &+ window : nil
        }

        mutating func handOver(into log: RequestLog) {
            if let key, repeated > 0 {
                var counted = Tally(opened: .now)
                counted.repeated = repeated
                counted.slowestMicros = slowestMicros
                log.add(counted, for: key)
            }
            key = nil
            repeated = 0
            slowestMicros = 0
        }
    }

    /// Writes the counts of every window, ended or not (at shutdown).
    func flush() {
        let tallies = state.withLock { state in
            defer { state.tallies.removeAll() }
            return state.tallies
        }
        for (key, tally) in tallies where tally.repeated > 0 { writeRepeats(key, tally) }
    }

    /// Writes the counts of the windows that have ended and forgets them; runs while any window is open.
    private func sweep() {
        let now = ContinuousClock.now
        let window = self.window
        let (ended, more) = state.withLock { state -> ([(Key, Tally)], Bool) in
            var ended: [(Key, Tally)] = []
            for (key, tally) in state.tallies where now - tally.opened >= window {
                ended.append((key, tally))
                state.tallies[key] = nil
            }
            state.sweepScheduled = !state.tallies.isEmpty
            return (ended, state.sweepScheduled)
        }
        for (key, tally) in ended where tally.repeated > 0 { writeRepeats(key, tally) }
        if more { scheduleNextSweep() }
    }

    private func scheduleNextSweep() {
        let window = self.window
        Task { [weak self] in
            try? await Task.sleep(for: window)
            self?.sweep()
        }
    }

    private func write(_ key: Key, micros: Int64) {
        logger.info("request", metadata: [
            "method": "\(key.method)", "client_pid": "\(key.pid)", "client_exe": "\(key.executable ?? "?")",
            "duration_us": "\(micros)", "outcome": "\(key.outcome)",
        ])
    }

    private func writeRepeats(_ key: Key, _ tally: Tally) {
        let seconds = window.components.seconds
        logger.info("request", metadata: [
            "method": "\(key.method)", "client_pid": "\(key.pid)", "client_exe": "\(key.executable ?? "?")",
            "outcome": "\(key.outcome)", "repeated": "\(tally.repeated)", "within_s": "\(seconds)",
            "slowest_us": "\(tally.slowestMicros)",
        ])
    }
}
