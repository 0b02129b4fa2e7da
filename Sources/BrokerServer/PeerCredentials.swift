import BrokerCore
import BrokerPlatform

#if canImport(Glibc)
import Glibc
#endif

/// Who is on the other end of a connection, from SO_PEERCRED (set by the kernel at connect time): what the request
/// log names. Which app it is, is the connection's `caller` (CallerIdentity), worked out from an `AcceptedPeer`.
public struct PeerIdentity: Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// `/proc/<pid>/exe`, when readable.
    public var executable: String?

    public var description: String { "pid \(pid) uid \(uid) (\(executable ?? "?"))" }
}

/// The peer of a connection as accepted: its credentials, and its process pinned at accept (`SO_PEERPIDFD`, else
/// `pidfd_open` of the SO_PEERCRED pid) so that the identity read later is that process's. The connection keeps the
/// pin for its life.
struct AcceptedPeer: Sendable {
    var identity: PeerIdentity
    /// The process, pinned; or why it could not be (it had exited).
    var process: Result<PinnedProcess, ProbeFailure>
    /// `SO_PEERSEC`: the LSM label at connect time (AppArmor's `snap.NAME.APP (enforce)`), when an LSM labels sockets.
    var securityLabel: String?

    /// The caller's identity, read through its pinned `/proc` directory: once per connection, on its own thread.
    func identify() -> CallerIdentity {
        let (uid, pid, executable) = (identity.uid, identity.pid, identity.executable)
        // Root let in by `allow_root` while brokerd runs as another user: its /proc entry is closed to brokerd, and no
        // sandbox binds root. It is named by its executable, as the kernel showed it at connect time.
        if uid == 0, geteuid() != 0 {
            return CallerIdentity(uid: uid, pid: pid, executable: executable ?? "(a process of root)",
                                  notes: ["root, let in by allow_root: not inspected"])
        }
        do {
            let pinned = try process.get()
            let facts = try ProcessProbe.facts(of: pinned, label: securityLabel)
            return CallerIdentity.classify(uid: uid, pid: facts.pid, pinnedBy: pinned.source.rawValue, executable: facts.executable,
                                           cgroup: facts.cgroup, securityLabel: facts.securityLabel, root: .init(facts.root))
        } catch {
            return .unidentified(uid: uid, pid: pid, executable: executable, reason: error.description)
        }
    }
}

extension CallerIdentity.Root {
    init(_ root: ProcessFacts.Root) {
        switch root {
        case .brokersOwn: self = .brokersOwn
        case .noFlatpakInfo: self = .noFlatpakInfo
        case .flatpakInfo(let bytes): self = .flatpakInfo(bytes)
        }
    }
}

/// glibc's `struct ucred`, which Swift cannot see: same layout.
private struct UCred: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

enum PeerCredentials {
    /// The peer of a connected Unix socket, from SO_PEERCRED, pinned; nil if the kernel does not say.
    static func read(from fd: Int32) -> AcceptedPeer? {
        var cred = UCred()
        var length = socklen_t(MemoryLayout<UCred>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0, length == MemoryLayout<UCred>.size else {
            return nil
        }
        let identity = PeerIdentity(pid: cred.pid, uid: cred.uid, gid: cred.gid,
                                    executable: ProcessProbe.executablePath(of: cred.pid))
        return AcceptedPeer(identity: identity, process: ProcessProbe.pin(peerOf: fd, pid: cred.pid),
                            securityLabel: securityLabel(of: fd))
    }

    /// `SO_PEERSEC`, when an LSM labels the socket (none does on a machine without AppArmor or SELinux).
    static func securityLabel(of fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 512)
        var length = socklen_t(buffer.count)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERSEC, &buffer, &length) == 0, length > 0 else { return nil }
        let label = ProcessLabel.trimmed(String(decoding: buffer[0..<Int(length)], as: UTF8.self))
        return label.isEmpty ? nil : label
    }
}
