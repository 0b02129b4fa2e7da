import BrokerPlatform
import Synchronization

/// Settings that SIGHUP may change while connections are open. The per-connection ones (in flight, batch, line
/// timeout, idle timeout) are read once when a connection opens, so a request never takes the settings lock.
public struct ServerSettings: Sendable {
    public var allowRoot: Bool
    public var maxConnections: Int
    /// Connections one process (by SO_PEERCRED pid) may hold, so one leaky app cannot take every slot.
    public var maxConnectionsPerProcess: Int
    public var idleTimeout: Duration
    /// Requests (each batch member counts) one connection may have running before brokerd stops reading from it.
    public var maxInFlightPerConnection: Int
    /// Members a batch may have; a longer batch is refused whole.
    public var maxBatchSize: Int
    /// Time a client has to finish a line it has begun (while brokerd reads), before an error and the close.
    public var lineTimeout: Duration
    public var maxMessageBytes: Int

    public init(allowRoot: Bool = false, maxConnections: Int = 256, maxConnectionsPerProcess: Int = 64,
                idleTimeout: Duration = .seconds(300), maxInFlightPerConnection: Int = 64, maxBatchSize: Int = 100,
                lineTimeout: Duration = .seconds(10), maxMessageBytes: Int = 1 << 20) {
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

/// Bookkeeping shared by every connection: settings, open connections, counters, and whether new work is taken.
///
/// The counters are atomics, not under the lock: every request counts itself in and out, from every connection's
/// thread, and a lock they all take is one a preempted holder makes them all wait on.
final class ServerState: Sendable {
    let settings: Locked<ServerSettings>
    private let connections = Locked<[ObjectIdentifier: ClientConnection]>([:])
    private let running = Atomic<Int>(0)
    private let served = Atomic<Int>(0)
    private let draining = Atomic<Bool>(false)
    let ownUID: UInt32

    init(settings: ServerSettings, ownUID: UInt32) {
        self.settings = Locked(settings)
        self.ownUID = ownUID
    }

    var connectionCount: Int { connections.withLock { $0.count } }
    /// Requests answered: those counted here, and the repeated ones each connection answered from its memory.
    var requestsServed: Int {
        connections.withLock { connections in
            served.load(ordering: .relaxed) + connections.values.reduce(0) { $0 + $1.answeredFromMemory }
        }
    }
    var inFlight: Int { running.load(ordering: .sequentiallyConsistent) }
    var isDraining: Bool { draining.load(ordering: .sequentiallyConsistent) }

    /// Registers an admitted connection (the caps are ConnectionTable's); false once shutting down.
    func register(_ connection: ClientConnection) -> Bool {
        connections.withLock { connections in
            guard !isDraining else { return false }
            connections[ObjectIdentifier(connection)] = connection
            return true
        }
    }

    func release(_ connection: ClientConnection) {
        connections.withLock { connections in
            guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
            served.add(connection.answeredFromMemory, ordering: .relaxed)
        }
    }

    /// Counts a request in; false when shutting down. Counted before the check, so that a stop which has begun
    /// draining either sees this request running or this request sees the stop.
    func begin() -> Bool {
        running.add(1, ordering: .sequentiallyConsistent)
        guard !isDraining else {
            running.subtract(1, ordering: .sequentiallyConsistent)
            return false
        }
        return true
    }

    func end(served counted: Bool = true) {
        running.subtract(1, ordering: .sequentiallyConsistent)
        if counted { countServed() }
    }

    func countServed() { served.add(1, ordering: .relaxed) }

    func startDraining() -> [ClientConnection] {
        connections.withLock { connections in
            draining.store(true, ordering: .sequentiallyConsistent)
            return Array(connections.values)
        }
    }

    func isAllowed(_ peer: PeerIdentity) -> Bool {
        if peer.uid == ownUID { return true }
        return peer.uid == 0 && settings.withLock { $0.allowRoot }
    }
}
