import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// glibc's `struct ucred` (not visible from Swift): same layout.
private struct PeerCredentials {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// Opens the Unix socket to brokerd with plain system calls, so that the peer can be checked before a single byte
/// is sent; the connected descriptor is then handed to SwiftNIO.
enum UnixSocket {
    static func connect(to path: String) throws(BrokerClientError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connection("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw .brokerNotRunning(socket: path, reason: "socket path too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .brokerNotRunning(socket: path, reason: reason)
        }
        // Talk only to a brokerd of this user (or root's system service): whoever else listens there could hand
        // out forged tokens or collect imported caches.
        var credentials = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            close(fd)
            throw .connection("cannot read the peer credentials of \(path)")
        }
        guard credentials.uid == getuid() || credentials.uid == 0 || getuid() == 0 else {
            close(fd)
            throw .connection("\(path) is served by uid \(credentials.uid), not by this user; refusing to use it")
        }
        return fd
    }
}
