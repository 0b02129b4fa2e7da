import BrokerPlatform

/// The open connections, for the two connection caps: at most `maxConnections` in all and
/// `maxConnectionsPerProcess` per client process. At a cap, the connection that has been idle longest and has
/// nothing running is closed to make room, and only when there is none is the newcomer refused: a leaky app that
/// opens connections and leaves them stalled loses its own oldest ones instead of locking every other app out.
///
/// Why a lock: connections open and close on their own threads. It is taken only when a connection opens or
/// closes, never per request.
final class ConnectionTable: Sendable {
    private struct Entries {
        var open: [ObjectIdentifier: ClientConnection] = [:]
        var perProcess: [Int32: Int] = [:]
    }

    private let entries = Locked(Entries())

    enum Admission: Equatable {
        case admitted
        /// Every connection that counts against the cap is busy; the message says which cap.
        case refused(String)
    }

    /// Makes room for `newcomer` by evicting idle connections if a cap is reached.
    func admit(_ newcomer: ClientConnection, settings: ServerSettings) -> Admission {
        let pid = newcomer.peer.pid
        return entries.withLock { entries in
            while entries.perProcess[pid, default: 0] >= settings.maxConnectionsPerProcess {
                guard evictLongestIdle(&entries, where: { $0.peer.pid == pid }, making: "room for a newer connection of "
                                       + "the same process (limit \(settings.maxConnectionsPerProcess) per process)") else {
                    return .refused("too many connections from this process (limit \(settings.maxConnectionsPerProcess)), "
                                    + "and all of them are busy")
                }
            }
            while entries.open.count >= settings.maxConnections {
                guard evictLongestIdle(&entries, where: { _ in true },
                                       making: "room for another client (limit \(settings.maxConnections) connections)") else {
                    return .refused("too many connections (limit \(settings.maxConnections)), and all of them are busy; "
                                    + "try again later")
                }
            }
            entries.open[ObjectIdentifier(newcomer)] = newcomer
            entries.perProcess[pid, default: 0] += 1
            return .admitted
        }
    }

    /// Forgets a connection; idempotent (an evicted connection is removed at once and again when it closes).
    func remove(_ connection: ClientConnection) {
        entries.withLock { Self.remove(connection, from: &$0) }
    }

    private static func remove(_ connection: ClientConnection, from entries: inout Entries) {
        guard entries.open.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        let pid = connection.peer.pid
        let remaining = entries.perProcess[pid, default: 1] - 1
        entries.perProcess[pid] = remaining > 0 ? remaining : nil
    }

    /// Closes the matching connection idle longest, if one is idle; a connection that starts work while it is being
    /// chosen is not closed (`ClientConnection.claimForEviction`), and the next is tried.
    private func evictLongestIdle(_ entries: inout Entries, where matches: (ClientConnection) -> Bool,
                                  making room: String) -> Bool {
        var candidates = entries.open.values.filter { matches($0) && $0.mayBeEvicted }
        candidates.sort { $0.lastActivity < $1.lastActivity }
        for victim in candidates where victim.claimForEviction(reason: room) {
            Self.remove(victim, from: &entries)
            return true
        }
        return false
    }
}
