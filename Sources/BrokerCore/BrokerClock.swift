import BrokerPlatform

#if canImport(Glibc)
import Glibc
#endif

/// The broker's two clocks, injected (`Broker(clock:)`, `AppAccess(clock:)`), so that tests move time by hand instead
/// of sleeping.
public protocol BrokerClock: Sendable {
    /// Wall-clock Unix seconds: what token lifetimes are measured against, since the IdP states them on its wall clock.
    func now() -> Int64
    /// Seconds on a clock that only moves forward and keeps counting through a suspend (CLOCK_BOOTTIME): what
    /// brokerd's own waits (retry backoffs, discovery lifetimes, the background refresh's checks) are measured on, so
    /// that a step of the wall clock (an NTP correction, a clock set by hand) neither stretches a wait for as long as
    /// the step nor cuts it short.
    func elapsed() -> Int64
    /// Waits `duration` on the elapsed clock; throws when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

extension BrokerClock {
    public func sleep(seconds: Int64) async throws { try await sleep(for: .seconds(seconds)) }
}

/// The machine's clocks.
public struct SystemClock: BrokerClock {
    public init() {}

    public func now() -> Int64 { Int64(time(nil)) }

    public func elapsed() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_BOOTTIME, &spec)
        return Int64(spec.tv_sec)
    }

    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}

/// A clock that moves only when told (`advance`): both clocks move together, as they do while the machine runs,
/// and `stepWallClock` moves the wall clock alone, as a suspend or an NTP correction does. A `sleep` ends when the
/// elapsed clock reaches its end.
public final class ManualClock: BrokerClock, @unchecked Sendable {
    private struct Sleeper {
        var until: Int64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var wall: Int64
        var elapsed: Int64 = 0
        var sleepers: [Int: Sleeper] = [:]
        var nextId = 0
    }

    private let state: Locked<State>

    public init(now: Int64) { state = Locked(State(wall: now)) }

    public func now() -> Int64 { state.withLock { $0.wall } }
    public func elapsed() -> Int64 { state.withLock { $0.elapsed } }

    /// How many tasks are waiting in `sleep`: a test advances the clock once the code it drives is waiting.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// A wait of a fraction of a second ends at the next whole second: this clock counts whole seconds.
    public func sleep(for duration: Duration) async throws {
        let (whole, fraction) = duration.components
        let seconds = whole + (fraction > 0 ? 1 : 0)
        let id = state.withLock { state -> Int in
            defer { state.nextId += 1 }
            return state.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool in
                    if seconds <= 0 || Task.isCancelled { return true }
                    state.sleepers[id] = Sleeper(until: state.elapsed + seconds, continuation: continuation)
                    return false
                }
                if resumeNow {
                    if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves both clocks forward and wakes the sleeps that end by then.
    public func advance(by seconds: Int64) {
        let due = state.withLock { state -> [Sleeper] in
            state.wall += seconds
            state.elapsed += seconds
            let due = state.sleepers.filter { $0.value.until <= state.elapsed }
            for id in due.keys { state.sleepers[id] = nil }
            return Array(due.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves the wall clock alone (a suspend seen from the wall clock, or a correction, either way).
    public func stepWallClock(by seconds: Int64) {
        state.withLock { $0.wall += seconds }
    }
}
