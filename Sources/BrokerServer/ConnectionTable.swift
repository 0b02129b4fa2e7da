/// The open connections, for the two connection caps: at most `maxConnections` in all and
/// `maxConnectionsPerProcess` per client process. At a cap, the connection that has been idle longest and has
/// nothing running is closed to make room, and only when there is none is the newcomer refused: a leaky app that
/// opens connections and leaves them stalled loses its own oldest ones instead of locking every other app out.
///
/// Confined to the server's one event loop (BrokerServer.start): no lock, and it is touched only when a connection
/// opens or closes, never per request. Idleness is an activity counter, not a clock, so marking activity costs an
/// increment.
final class ConnectionTable {
    private var open: [ObjectIdentifier: ConnectionHandler] = [:]
    private var perProcess: [Int32: Int] = [:]
    private var activityCounter: UInt64 = 0

    var count: Int { open.count }

    /// A number that grows with every call: the smaller a connection's last one, the longer it has been idle.
    func nextActivityMark() -> UInt64 {
        activityCounter &+= 1
        return activityCounter
    }

    enum Admission: Equatable {
        case admitted
        /// Every connection that counts against the cap is busy; the message says which cap.
        case refused(String)
    }

    /// Makes room for `newcomer` (whose peer is known) by evicting idle connections if a cap is reached.
    func admit(_ newcomer: ConnectionHandler, settings: ServerSettings) -> Admission {
        let pid = newcomer.peer.pid
        while perProcess[pid, default: 0] >= settings.maxConnectionsPerProcess {
            guard let victim = longestIdle(where: { $0.peer.pid == pid }) else {
                return .refused("too many connections from this process (limit \(settings.maxConnectionsPerProcess)), "
                                + "and all of them are busy")
            }
            evict(victim, making: "room for a newer connection of the same process "
                  + "(limit \(settings.maxConnectionsPerProcess) per process)")
        }
        while open.count >= settings.maxConnections {
            guard let victim = longestIdle(where: { _ in true }) else {
                return .refused("too many connections (limit \(settings.maxConnections)), and all of them are busy; "
                                + "try again later")
            }
            evict(victim, making: "room for another client (limit \(settings.maxConnections) connections)")
        }
        open[ObjectIdentifier(newcomer)] = newcomer
        perProcess[pid, default: 0] += 1
        return .admitted
    }

    /// Forgets a connection; idempotent (an evicted connection is removed at once and again when it closes).
    func remove(_ handler: ConnectionHandler) {
        guard open.removeValue(forKey: ObjectIdentifier(handler)) != nil else { return }
        let pid = handler.peer.pid
        let remaining = perProcess[pid, default: 1] - 1
        perProcess[pid] = remaining > 0 ? remaining : nil
    }

    private func longestIdle(where matches: (ConnectionHandler) -> Bool) -> ConnectionHandler? {
        var oldest: ConnectionHandler?
        for handler in open.values where matches(handler) && handler.isEvictable {
            if oldest.map({ handler.lastActivity < $0.lastActivity }) ?? true { oldest = handler }
        }
        return oldest
    }

    private func evict(_ victim: ConnectionHandler, making room: String) {
        remove(victim)
        victim.evict(reason: room)
    }
}
