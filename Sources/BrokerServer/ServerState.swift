import NIOConcurrencyHelpers
import NIOCore

/// Settings that SIGHUP may change while connections are open.
public struct ServerSettings: Sendable {
    public var allowRoot: Bool
    public var maxConnections: Int
    public var idleTimeout: TimeAmount
    /// Requests one connection may have in flight before brokerd stops reading from it.
    public var maxInFlightPerConnection: Int
    public var maxMessageBytes: Int

    public init(allowRoot: Bool = false, maxConnections: Int = 256, idleTimeout: TimeAmount = .seconds(300),
                maxInFlightPerConnection: Int = 64, maxMessageBytes: Int = 1 << 20) {
        self.allowRoot = allowRoot
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.maxInFlightPerConnection = maxInFlightPerConnection
        self.maxMessageBytes = maxMessageBytes
    }
}

/// Bookkeeping shared by every connection: settings, open channels, counters, and whether new work is taken.
final class ServerState: Sendable {
    private struct Counters {
        var channels: [ObjectIdentifier: Channel] = [:]
        var inFlight = 0
        var served = 0
        var draining = false
    }

    let settings: NIOLockedValueBox<ServerSettings>
    private let counters = NIOLockedValueBox(Counters())
    let ownUID: UInt32

    init(settings: ServerSettings, ownUID: UInt32) {
        self.settings = NIOLockedValueBox(settings)
        self.ownUID = ownUID
    }

    var connectionCount: Int { counters.withLockedValue { $0.channels.count } }
    var requestsServed: Int { counters.withLockedValue { $0.served } }
    var inFlight: Int { counters.withLockedValue { $0.inFlight } }
    var isDraining: Bool { counters.withLockedValue { $0.draining } }

    /// Registers a connection unless the cap is reached.
    func admit(_ channel: Channel) -> Bool {
        let cap = settings.withLockedValue { $0.maxConnections }
        return counters.withLockedValue { state in
            guard state.channels.count < cap, !state.draining else { return false }
            state.channels[ObjectIdentifier(channel)] = channel
            return true
        }
    }

    func release(_ channel: Channel) {
        counters.withLockedValue { _ = $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Counts a request in; false when shutting down.
    func begin() -> Bool {
        counters.withLockedValue { state in
            guard !state.draining else { return false }
            state.inFlight += 1
            return true
        }
    }

    func end(served: Bool = true) {
        counters.withLockedValue {
            $0.inFlight -= 1
            if served { $0.served += 1 }
        }
    }

    func startDraining() -> [Channel] {
        counters.withLockedValue {
            $0.draining = true
            return Array($0.channels.values)
        }
    }

    func isAllowed(_ peer: PeerIdentity) -> Bool {
        if peer.uid == ownUID { return true }
        return peer.uid == 0 && settings.withLockedValue { $0.allowRoot }
    }
}
