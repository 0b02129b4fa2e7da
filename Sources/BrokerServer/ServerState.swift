import NIOConcurrencyHelpers
import NIOCore

/// Settings that SIGHUP may change while connections are open. The per-connection ones (in flight, batch, line
/// timeout, idle timeout) are read once when a connection opens, so a request never takes the settings lock.
public struct ServerSettings: Sendable {
    public var allowRoot: Bool
    public var maxConnections: Int
    /// Connections one process (by SO_PEERCRED pid) may hold, so one leaky app cannot take every slot.
    public var maxConnectionsPerProcess: Int
    public var idleTimeout: TimeAmount
    /// Requests (each batch member counts) one connection may have running before brokerd stops reading from it.
    public var maxInFlightPerConnection: Int
    /// Members a batch may have; a longer batch is refused whole.
    public var maxBatchSize: Int
    /// Time a client has to finish a line it has begun (while brokerd reads), before an error and the close.
    public var lineTimeout: TimeAmount
    public var maxMessageBytes: Int

    public init(allowRoot: Bool = false, maxConnections: Int = 256, maxConnectionsPerProcess: Int = 64,
                idleTimeout: TimeAmount = .seconds(300), maxInFlightPerConnection: Int = 64, maxBatchSize: Int = 100,
                lineTimeout: TimeAmount = .seconds(10), maxMessageBytes: Int = 1 << 20) {
        self.allowRoot = allowRoot
        self.maxConnections = maxConnections
        self.maxConnectionsPerProcess = maxConnectionsPerProcess
        self.idleTimeout = idleTimeout
        self.maxInFlightPerConnection = maxInFlightPerConnection
        self.maxBatchSize = maxBatchSize
        self.lineTimeout = lineTimeout
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

    /// Registers an admitted connection (the caps are ConnectionTable's); false once shutting down.
    func register(_ channel: Channel) -> Bool {
        counters.withLockedValue { state in
            guard !state.draining else { return false }
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
