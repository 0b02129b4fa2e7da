#if canImport(Glibc)
import Glibc
#endif

/// The few system facilities doctor needs without Foundation: running a helper program (systemctl, busctl) with
/// its output captured, stat, statvfs and /proc.
enum DoctorSystem {
    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
        var succeeded: Bool { status == 0 }
    }

    /// Runs `program` (found on $PATH) with doctor's environment; nil when it is not installed. A helper that has not
    /// finished within `timeoutSeconds` is killed: a wedged user manager must not wedge doctor.
    static func run(_ program: String, _ arguments: [String], timeoutSeconds: Int = 10) -> Output? {
        guard let path = executable(program) else { return nil }
        var out: [Int32] = [0, 0], err: [Int32] = [0, 0], input: [Int32] = [0, 0]
        guard pipe(&out) == 0, pipe(&err) == 0, pipe(&input) == 0 else { return nil }
        // Only the child's copies (dup2'd to 0, 1, 2) survive exec; brokerctl's other descriptors must not leak into it.
        for fd in out + err + input { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, out[1], 1)
        posix_spawn_file_actions_adddup2(&actions, err[1], 2)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, currentEnvironment())
        for fd in [out[1], err[1], input[0], input[1]] { close(fd) }
        guard spawned == 0 else {
            close(out[0]); close(err[0])
            return nil
        }
        let (stdout, stderr, timedOut) = drain(out[0], err[0], timeoutSeconds: timeoutSeconds)
        if timedOut { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exitStatus = timedOut ? 124 : ((status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f))
        return Output(status: exitStatus, stdout: stdout, stderr: timedOut ? "no answer within \(timeoutSeconds) s" : stderr)
    }

    /// Reads both pipes to their end (or the deadline), so that neither can fill up and block the child.
    private static func drain(_ outFD: Int32, _ errFD: Int32, timeoutSeconds: Int) -> (String, String, Bool) {
        var collected: [Int32: [UInt8]] = [outFD: [], errFD: []]
        var open = [outFD, errFD]
        let deadline = monotonicSeconds() + Double(timeoutSeconds)
        var chunk = [UInt8](repeating: 0, count: 16384)
        while !open.isEmpty {
            let left = deadline - monotonicSeconds()
            if left <= 0 { break }
            var polled = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&polled, nfds_t(polled.count), Int32(min(left, 1) * 1000))
            if ready < 0 && errno != EINTR { break }
            for entry in polled where entry.revents != 0 {
                let n = chunk.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if n > 0 { collected[entry.fd, default: []].append(contentsOf: chunk[0..<n]) } else if n == 0 || errno != EINTR {
                    open.removeAll { $0 == entry.fd }
                }
            }
        }
        let timedOut = !open.isEmpty
        close(outFD); close(errFD)
        return (String(decoding: collected[outFD] ?? [], as: UTF8.self), String(decoding: collected[errFD] ?? [], as: UTF8.self),
                timedOut)
    }

    static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// `program` on $PATH (or as given when it holds a slash), when executable.
    static func executable(_ program: String) -> String? {
        if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
        let path = environment("PATH") ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(program)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// An environment variable of doctor itself; nil when unset or empty.
    static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    private static func currentEnvironment() -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
        // Read once per spawn on the calling thread; brokerctl never changes its environment.
        Glibc.environ
    }

    /// A process's environment (`/proc/PID/environ`, readable for the user's own processes), nil when unreadable.
    static func environment(ofProcess pid: Int32) -> [String: String]? {
        guard let bytes = try? LocalFile.read("/proc/\(pid)/environ") else { return nil }
        var variables: [String: String] = [:]
        for entry in bytes.split(separator: 0) {
            let text = String(decoding: entry, as: UTF8.self)
            guard let equals = text.firstIndex(of: "=") else { continue }
            variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        return variables
    }

    /// The short name and command line of a process, for "pid 1234 (microsoft-identity-broker)".
    static func describeProcess(_ pid: Int32) -> String {
        let comm = (try? LocalFile.read("/proc/\(pid)/comm")).map { String(decoding: $0, as: UTF8.self) }?
            .trimmingNewlines() ?? ""
        let exe = readLink("/proc/\(pid)/exe")
        let name = exe ?? (comm.isEmpty ? nil : comm)
        return "pid \(pid)" + (name.map { " (\($0))" } ?? "")
    }

    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func fileStatus(_ path: String) -> stat? {
        var status = stat()
        return lstat(path, &status) == 0 ? status : nil
    }

    static func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    /// The nearest directory of `path` that exists (the state directory may not have been made yet).
    static func existingAncestor(_ path: String) -> String {
        var current = path
        while current.count > 1 {
            if let status = fileStatus(current), (status.st_mode & S_IFMT) == S_IFDIR { return current }
            current = parent(current)
        }
        return "/"
    }

    static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

extension String {
    func trimmingNewlines() -> String {
        var text = Substring(self)
        while let last = text.last, last == "\n" || last == "\r" || last == " " { text = text.dropLast() }
        return String(text)
    }
}
