#if canImport(Glibc)
import Glibc
#endif

/// Who is on the other end of a connection, from SO_PEERCRED (set by the kernel at connect time).
public struct PeerIdentity: Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// `/proc/<pid>/exe`, when readable.
    public var executable: String?

    public var description: String { "pid \(pid) uid \(uid) (\(executable ?? "?"))" }

    static func executablePath(of pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// glibc's `struct ucred`, which Swift cannot see: same layout.
private struct UCred: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

enum PeerCredentials {
    /// The peer of a connected Unix socket, from SO_PEERCRED; nil if the kernel does not say.
    static func read(from fd: Int32) -> PeerIdentity? {
        var cred = UCred()
        var length = socklen_t(MemoryLayout<UCred>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0, length == MemoryLayout<UCred>.size else {
            return nil
        }
        return PeerIdentity(pid: cred.pid, uid: cred.uid, gid: cred.gid, executable: PeerIdentity.executablePath(of: cred.pid))
    }
}
