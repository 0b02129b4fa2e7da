import CBrokerPlatform

#if canImport(Glibc)
import Glibc
#endif

/// A process held by a pidfd: the kernel keeps the pid from naming another process while the descriptor is open, and
/// says when the process is gone. Closed when the last reference goes.
public final class PinnedProcess: Sendable {
    public enum Source: String, Sendable {
        /// `SO_PEERPIDFD` (Linux 6.5): the kernel took the process at connect time; no race at all.
        case peerPidfd = "SO_PEERPIDFD"
        /// `ProcessFD` of the bus's `GetConnectionCredentials` (dbus-daemon 1.15.8+, dbus-broker 34+): the bus took it
        /// when the sender connected.
        case busProcessFD = "ProcessFD"
        /// `pidfd_open` on a pid the socket or the bus reported (Debian 12's kernel and buses): the process that had
        /// the pid when it was opened, right after accept or at the first call of a bus name.
        case pidfdOpen = "pidfd_open"
    }

    public let pid: Int32
    public let descriptor: Int32
    public let source: Source

    init(pid: Int32, descriptor: Int32, source: Source) {
        self.pid = pid
        self.descriptor = descriptor
        self.source = source
    }

    deinit { close(descriptor) }

    /// Whether the pinned process still runs under `pid`: its pidfd's fdinfo names the pid (`-1` once it was reaped)
    /// and the pidfd is not readable (it is from the moment the process exits, zombie or not; pidfd_open(2)). Asked
    /// with poll, not with signal 0 through pidfd_send_signal, which valgrind 3.19 does not know: under valgrind every
    /// caller was unknown, and profiling brokerd (scripts/order-file.sh) could not call it.
    public var isAlive: Bool {
        guard ProcessProbe.pid(ofPidfd: descriptor) == pid else { return false }
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }
}

/// What `/proc` says of a pinned process, read through one directory descriptor and checked against the pidfd
/// afterwards (the open-then-verify pattern of systemd's `pidref_verify`): if the process exited meanwhile, nothing read
/// is used.
public struct ProcessFacts: Sendable {
    public enum Root: Sendable, Equatable {
        /// The process sees brokerd's own root directory (the same device and inode): a host process, whatever files
        /// that root holds.
        case brokersOwn
        /// Another root, without `/.flatpak-info`.
        case noFlatpakInfo
        /// Another root, with this `/.flatpak-info` (read through the process's own root, as xdg-desktop-portal does).
        case flatpakInfo([UInt8])
    }

    public var pid: Int32
    public var executable: String?
    /// `/proc/PID/cgroup` as it reads.
    public var cgroup: String?
    /// The LSM label (AppArmor: `snap.NAME.APP (enforce)`, `unconfined`), from the socket or bus when they gave one,
    /// else `/proc/PID/attr/apparmor/current`; nil when no LSM labels processes.
    public var securityLabel: String?
    public var root: Root
}

public struct ProbeFailure: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Reads who a process is, race-free where the kernel allows (`../shared/reference/app-identity.md` §4).
public enum ProcessProbe {
    /// The peer of a connected Unix socket, pinned: `SO_PEERPIDFD` where the kernel has it, else (ENOPROTOOPT)
    /// `pidfd_open` of the pid `SO_PEERCRED` gave.
    public static func pin(peerOf socket: Int32, pid: Int32) -> Result<PinnedProcess, ProbeFailure> {
        let descriptor = brokerd_peer_pidfd(socket)
        if descriptor >= 0 { return adopt(pidfd: descriptor, source: .peerPidfd) }
        // Only a kernel without the option falls back to the pid: on one with it, a failure (EINVAL, ESRCH) means the
        // process that connected is gone, and pidfd_open would pin whoever has its pid now.
        guard errno == ENOPROTOOPT else {
            return .failure(ProbeFailure("the process that connected (pid \(pid)) is gone: \(String(cString: strerror(errno)))"))
        }
        return pin(pid: pid)
    }

    /// A pidfd handed over by someone who pinned the process (the bus's `ProcessFD`); closed with the result.
    public static func adopt(pidfd descriptor: Int32, source: PinnedProcess.Source) -> Result<PinnedProcess, ProbeFailure> {
        guard let pid = ProcessProbe.pid(ofPidfd: descriptor), pid > 0 else {
            close(descriptor)
            return .failure(ProbeFailure("the caller's process has exited"))
        }
        return .success(PinnedProcess(pid: pid, descriptor: descriptor, source: source))
    }

    /// `pidfd_open(pid)`: whichever process has the pid now.
    public static func pin(pid: Int32) -> Result<PinnedProcess, ProbeFailure> {
        guard pid > 0 else { return .failure(ProbeFailure("the caller's pid is unknown")) }
        let descriptor = brokerd_pidfd_open(pid)
        guard descriptor >= 0 else {
            let error = errno
            return .failure(ProbeFailure(error == ESRCH ? "the caller (pid \(pid)) has exited"
                                         : "pidfd_open(\(pid)): \(String(cString: strerror(error)))"))
        }
        return .success(PinnedProcess(pid: pid, descriptor: descriptor, source: .pidfdOpen))
    }

    /// Reads the process's facts through `/proc/PID`, then checks that the pidfd still names that pid: a failure
    /// anywhere (the process gone, its root unreadable, `/.flatpak-info` there but unreadable) is a failure, never
    /// "a host process". `label`: the LSM label the socket (`SO_PEERSEC`) or the bus reported, if any.
    public static func facts(of process: PinnedProcess, label: String? = nil) throws(ProbeFailure) -> ProcessFacts {
        let pid = process.pid
        let directory = open("/proc/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw ProbeFailure("cannot open /proc/\(pid): \(String(cString: strerror(errno)))") }
        defer { close(directory) }
        let executable = readLink(at: directory, "exe")
        let cgroup = readText(at: directory, "cgroup")
        let securityLabel = label ?? readText(at: directory, "attr/apparmor/current").map(trimmedLabel)
        let root = try readRoot(at: directory, pid: pid)
        guard process.isAlive else { throw ProbeFailure("the caller (pid \(pid)) exited while it was identified") }
        return ProcessFacts(pid: pid, executable: executable, cgroup: cgroup, securityLabel: securityLabel, root: root)
    }

    static func trimmedLabel(_ text: String) -> String { ProcessLabel.trimmed(text) }

    static let flatpakInfoLimit = 1 << 20
    static let fuseMagic = 0x6573_5546

    private static func readRoot(at directory: Int32, pid: Int32) throws(ProbeFailure) -> ProcessFacts.Root {
        let root = openat(directory, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else {
            let error = errno
            // As xdg-desktop-portal: a root on FUSE that refuses us (toolbox, distrobox) is no Flatpak's.
            if error == EACCES, brokerd_filesystem_type("/proc/\(pid)/root") == fuseMagic { return .noFlatpakInfo }
            throw ProbeFailure("cannot open /proc/\(pid)/root: \(String(cString: strerror(error)))")
        }
        defer { close(root) }
        var theirs = stat(), ours = stat()
        guard fstat(root, &theirs) == 0, stat("/proc/self/root/", &ours) == 0 else {
            throw ProbeFailure("cannot stat the root of pid \(pid): \(String(cString: strerror(errno)))")
        }
        if theirs.st_dev == ours.st_dev, theirs.st_ino == ours.st_ino { return .brokersOwn }
        let info = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard info >= 0 else {
            if errno == ENOENT { return .noFlatpakInfo }
            throw ProbeFailure("cannot open /.flatpak-info of pid \(pid): \(String(cString: strerror(errno)))")
        }
        defer { close(info) }
        var fileInfo = stat()
        guard fstat(info, &fileInfo) == 0, fileInfo.st_mode & S_IFMT == S_IFREG, Int(fileInfo.st_size) <= flatpakInfoLimit else {
            throw ProbeFailure("/.flatpak-info of pid \(pid) is not a regular file of at most \(flatpakInfoLimit) bytes")
        }
        guard let bytes = readAll(info, limit: flatpakInfoLimit) else {
            throw ProbeFailure("cannot read /.flatpak-info of pid \(pid): \(String(cString: strerror(errno)))")
        }
        return .flatpakInfo(bytes)
    }

    /// The pid a pidfd names (`Pid:` in its fdinfo): -1 once the process exited, nil when unreadable.
    static func pid(ofPidfd descriptor: Int32) -> Int32? {
        guard let text = readText(at: AT_FDCWD, "/proc/self/fdinfo/\(descriptor)") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Pid:") {
            return Int32(line.dropFirst(4).trimmingPrefix { $0 == " " || $0 == "\t" })
        }
        return nil
    }

    private static func readLink(at directory: Int32, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = buffer.withUnsafeMutableBytes { readlinkat(directory, name, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1) }
        guard length > 0 else { return nil }
        return String(decoding: buffer[0..<length], as: UTF8.self)
    }

    private static func readText(at directory: Int32, _ name: String) -> String? {
        let fd = openat(directory, name, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return readAll(fd, limit: 64 * 1024).map { String(decoding: $0, as: UTF8.self) }
    }

    private static func readAll(_ fd: Int32, limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= limit {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return nil
    }

    /// `/proc/<pid>/exe` as the kernel shows it, unpinned: what the request log names a peer by (its identity is read
    /// through the pinned process instead); nil when unreadable.
    public static func executablePath(of pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

public enum ProcessLabel {
    /// An LSM label as the kernel writes it, without the trailing newline or NUL.
    public static func trimmed(_ text: String) -> String {
        String(text.prefix { $0 != "\n" && $0 != "\0" })
    }
}
