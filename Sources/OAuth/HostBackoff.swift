import BrokerPlatform

/// Hosts that could not be reached, and until when a request to one fails at once instead of trying again.
///
/// Offline, every request that needs the network would otherwise wait for its own connect timeout: a token call
/// needs discovery and then the token endpoint, so a laptop on a train waited twice per call, on every call. After
/// a failure the host is left alone for a backoff that doubles while the failures go on (2 s … `maximumSeconds`);
/// a network change or a resume (`reset`) ends every backoff at once, and any answer from the host ends its own.
public final class HostBackoff: Sendable {
    public struct Blocked: Sendable, Equatable {
        public var host: String
        /// What the last attempt ran into (connection refused, timed out, …).
        public var why: String
        /// Seconds until the host is tried again (at least 1).
        public var retryAfter: Int64
        /// Failed attempts in a row.
        public var failures: Int
    }

    private struct State {
        var failures: Int
        var why: String
        var retryAt: Int64
    }

    public static let firstSeconds: Int64 = 2
    public let maximumSeconds: Int64
    private let clock: @Sendable () -> Int64
    private let hosts = Locked<[String: State]>([:])

    /// `clock`: seconds on a clock that only moves forward (brokerd passes `Broker.elapsed`).
    public init(maximumSeconds: Int64 = 60, clock: @escaping @Sendable () -> Int64) {
        self.maximumSeconds = max(Self.firstSeconds, maximumSeconds)
        self.clock = clock
    }

    /// Non-nil while `host` is backing off: the request is not to be sent.
    public func blocked(_ host: String) -> Blocked? {
        let now = clock()
        return hosts.withLock { hosts in
            guard let state = hosts[host], state.retryAt > now else { return nil }
            return Blocked(host: host, why: state.why, retryAfter: state.retryAt - now, failures: state.failures)
        }
    }

    /// An attempt could not reach `host`. Requests that were already on their way when the backoff began count as
    /// the same failure, so that a burst of callers does not grow the backoff by itself.
    @discardableResult
    public func failed(_ host: String, why: String) -> Blocked {
        let now = clock()
        return hosts.withLock { hosts in
            var state = hosts[host] ?? State(failures: 0, why: why, retryAt: now)
            if state.retryAt <= now {
                state.failures += 1
                let seconds = min(maximumSeconds, Self.firstSeconds << min(state.failures - 1, 20))
                state.retryAt = now + seconds
            }
            state.why = why
            hosts[host] = state
            return Blocked(host: host, why: why, retryAfter: max(1, state.retryAt - now), failures: state.failures)
        }
    }

    /// `host` answered (with anything): it is reachable again.
    public func reached(_ host: String) {
        hosts.withLock { hosts in
            if !hosts.isEmpty { hosts[host] = nil }
        }
    }

    /// The network changed (an address or route came, the machine woke up): every host is worth trying again.
    /// Returns the hosts that were backing off.
    @discardableResult
    public func reset() -> [String] {
        hosts.withLock { hosts in
            defer { hosts = [:] }
            return hosts.keys.sorted()
        }
    }

    /// Hosts that failed last time they were tried, with how many attempts in a row failed (for status and doctor).
    public func unreachableHosts() -> [Blocked] {
        let now = clock()
        return hosts.withLock { hosts in
            hosts.map { Blocked(host: $0.key, why: $0.value.why, retryAfter: max(0, $0.value.retryAt - now), failures: $0.value.failures) }
                .sorted { $0.host < $1.host }
        }
    }
}

/// How far each host's clock is from ours, from the `Date` header of its last answer (RFC 9110 §6.6.1): a local clock
/// minutes off makes fresh tokens look expired or not yet valid, and `brokerctl doctor` says so.
public final class HostClocks: Sendable {
    public struct Reading: Sendable, Equatable {
        public var host: String
        /// The host's time minus ours, in seconds (the header has a resolution of one second).
        public var skewSeconds: Int64
        /// Our Unix time when it was read.
        public var measuredAt: Int64
    }

    private let readings = Locked<[String: Reading]>([:])
    private let wallClock: @Sendable () -> Int64

    public init(wallClock: @escaping @Sendable () -> Int64) {
        self.wallClock = wallClock
    }

    public func note(host: String, dateHeader: String?) {
        guard let dateHeader, let theirs = Self.parseIMFFixdate(dateHeader) else { return }
        let now = wallClock()
        readings.withLock { $0[host] = Reading(host: host, skewSeconds: theirs - now, measuredAt: now) }
    }

    public func all() -> [Reading] {
        readings.withLock { Array($0.values) }.sorted { $0.host < $1.host }
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT` as Unix seconds (the form every HTTP/1.1 server sends); nil for anything else.
    public static func parseIMFFixdate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int64(parts[1]), (1...31).contains(day),
              let monthIndex = months.firstIndex(of: String(parts[2])), let year = Int64(parts[3]), year >= 1970 else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int64($0) }
        guard time.count == 3, (0...23).contains(time[0]), (0...59).contains(time[1]), (0...60).contains(time[2]) else { return nil }
        return daysSinceEpoch(year: year, month: Int64(monthIndex) + 1, day: day) * 86_400 + time[0] * 3600 + time[1] * 60 + time[2]
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
