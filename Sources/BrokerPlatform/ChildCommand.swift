import CBrokerPlatform

#if canImport(Glibc)
import Glibc
#endif

/// A shell command brokerd runs for the user (a `[hooks]` command): `/bin/sh -c COMMAND` in a process group of its own,
/// standard input from /dev/null, its output read line by line, and the whole group killed when its time is up. It runs
/// on a thread of its own, so a command that hangs holds neither a lock nor one of Swift's cooperative threads.
public struct ChildCommand: Sendable {
    public var command: String
    /// The child's whole environment, `NAME=value` each (see `ChildEnvironment`).
    public var environment: [String]
    public var timeoutSeconds: Int
    public var limits: OutputLimits

    public init(command: String, environment: [String], timeoutSeconds: Int, limits: OutputLimits = OutputLimits()) {
        self.command = command
        self.environment = environment
        self.timeoutSeconds = timeoutSeconds
        self.limits = limits
    }
}

/// How much of a child's output is passed on: a log must not fill up because a command is chatty.
public struct OutputLimits: Sendable, Equatable {
    /// A longer line is cut here (the rest of it is dropped).
    public var maximumLineBytes: Int
    /// Output past this many bytes (both streams together) is read and dropped.
    public var maximumTotalBytes: Int

    public init(maximumLineBytes: Int = 1024, maximumTotalBytes: Int = 16 * 1024) {
        self.maximumLineBytes = maximumLineBytes
        self.maximumTotalBytes = maximumTotalBytes
    }
}

public enum ChildStream: String, Sendable {
    case stdout, stderr
}

public enum ChildEnd: Sendable, Equatable {
    case exited(status: Int32)
    case killedBySignal(Int32)
    /// Still running at the time limit: its process group was sent SIGKILL.
    case timedOut
    /// posix_spawn failed (or no thread could be started): the system's reason.
    case notStarted(String)
}

public struct ChildReport: Sendable, Equatable {
    /// The shell's pid (-1 when it did not start).
    public var pid: Int32
    public var end: ChildEnd
    /// Bytes of output read but not passed on (past `OutputLimits`).
    public var droppedOutputBytes: Int
}

extension ChildCommand {
    /// Runs the command on a new thread; the task waits without blocking a thread of its own.
    public func run(onLine: @escaping @Sendable (ChildStream, String) -> Void) async -> ChildReport {
        await withCheckedContinuation { (continuation: CheckedContinuation<ChildReport, Never>) in
            let started = PlatformThread.detach { continuation.resume(returning: self.runBlocking(onLine: onLine)) }
            if !started {
                continuation.resume(returning: ChildReport(pid: -1, end: .notStarted("no thread could be started"),
                                                           droppedOutputBytes: 0))
            }
        }
    }

    /// Runs the command on the calling thread until it exits or its time is up, passing each line of its output on.
    public func runBlocking(onLine: @escaping (ChildStream, String) -> Void) -> ChildReport {
        let spawned: SpawnedChild
        switch SpawnedChild.start(command: command, environment: environment) {
        case .success(let child): spawned = child
        case .failure(let error): return ChildReport(pid: -1, end: .notStarted(error.description), droppedOutputBytes: 0)
        }
        var output = OutputLines(limits: limits, onLine: onLine)
        let end = spawned.wait(timeoutSeconds: timeoutSeconds, output: &output)
        output.finish()
        return ChildReport(pid: spawned.pid, end: end, droppedOutputBytes: output.droppedBytes)
    }
}

/// The environment of a child: brokerd's own, with `variables` set and any other inherited variable of `reserved`
/// removed (a stale value in brokerd's environment must not pass for this event's).
public enum ChildEnvironment {
    public static func merged(inherited: [String], reserved: Set<String>, variables: [(name: String, value: String)]) -> [String] {
        let set = Set(variables.map(\.name))
        let kept = inherited.filter { entry in
            let name = String(entry.prefix { $0 != "=" })
            return !reserved.contains(name) && !set.contains(name)
        }
        // A NUL would end the C string early; values come from identity providers, so strip it.
        return kept + variables.map { "\($0.name)=\($0.value.filter { $0 != "\0" })" }
    }

    /// brokerd's environment now.
    public static func current() -> [String] {
        var entries: [String] = []
        guard var cursor = environmentPointer() else { return entries }
        while let entry = cursor.pointee {
            entries.append(String(cString: entry))
            cursor += 1
        }
        return entries
    }

    private static func environmentPointer() -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
        nonisolated(unsafe) let pointer = environ
        return pointer
    }
}

/// The spawned shell and the read ends of its output pipes.
private struct SpawnedChild {
    let pid: pid_t
    let stdout: Int32
    let stderr: Int32

    struct SpawnFailure: Error, CustomStringConvertible {
        var code: Int32
        var description: String { String(cString: strerror(code)) }
    }

    static func start(command: String, environment: [String]) -> Result<SpawnedChild, SpawnFailure> {
        var out: [Int32] = [-1, -1], err: [Int32] = [-1, -1]
        guard pipe(&out) == 0 else { return .failure(SpawnFailure(code: errno)) }
        guard pipe(&err) == 0 else {
            let code = errno
            out.forEach { close($0) }
            return .failure(SpawnFailure(code: code))
        }
        // No pipe2(O_CLOEXEC) in Swift's Glibc: another spawn may inherit an end in between, which only delays an
        // end-of-file; the wait below goes by the process, not by end-of-file.
        for fd in out + err { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        for fd in [out[0], err[0]] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        var pid: pid_t = 0
        let result = withSpawnSettings(stdout: out[1], stderr: err[1]) { actions, attributes in
            withCStrings(["/bin/sh", "-c", command]) { argv in
                withCStrings(environment) { envp in posix_spawn(&pid, "/bin/sh", actions, attributes, argv, envp) }
            }
        }
        close(out[1])
        close(err[1])
        guard result == 0 else {
            close(out[0])
            close(err[0])
            return .failure(SpawnFailure(code: result))
        }
        return .success(SpawnedChild(pid: pid, stdout: out[0], stderr: err[0]))
    }

    /// File actions: stdin from /dev/null, the pipes as stdout and stderr, every other descriptor closed (one opened
    /// without close-on-exec, by a library, must not reach the user's command). Attributes: a new process group, every
    /// signal at its default action and none blocked (brokerd ignores some, and that would be inherited).
    private static func withSpawnSettings(stdout: Int32, stderr: Int32,
                                          _ body: (UnsafePointer<posix_spawn_file_actions_t>, UnsafePointer<posix_spawnattr_t>) -> Int32) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        // A descriptor closed meanwhile is no error (glibc ignores EBADF of a close action).
        for fd in openDescriptors() where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        posix_spawnattr_setpgroup(&attributes, 0)
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        return body(&actions, &attributes)
    }

    /// The descriptors open in brokerd now (/proc/self/fd).
    private static func openDescriptors() -> [Int32] {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        var descriptors: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if let fd = Int32(name) { descriptors.append(fd) }
        }
        return descriptors
    }

    /// Reads output until the shell exits, or kills its process group at the time limit; then reaps it.
    func wait(timeoutSeconds: Int, output: inout OutputLines) -> ChildEnd {
        let pidfd = brokerd_pidfd_open(pid)  // -1 before Linux 5.3: then the exit is polled for
        defer { if pidfd >= 0 { close(pidfd) } }
        var pipes: [(fd: Int32, stream: ChildStream)] = [(stdout, .stdout), (stderr, .stderr)]
        defer { pipes.forEach { close($0.fd) } }
        let deadline = Self.monotonicMilliseconds() + Int64(timeoutSeconds) * 1000
        while true {
            if let end = reap(blocking: false) {
                for pipe in pipes { _ = Self.drain(pipe.fd, pipe.stream, into: &output) }
                return end
            }
            let remaining = deadline - Self.monotonicMilliseconds()
            if remaining <= 0 {
                kill(-pid, SIGKILL)
                _ = reap(blocking: true)
                for pipe in pipes { _ = Self.drain(pipe.fd, pipe.stream, into: &output) }
                return .timedOut
            }
            var polled = pipes.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            if pidfd >= 0 { polled.append(pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)) }
            let waitMilliseconds = pidfd >= 0 ? remaining : min(remaining, 100)
            guard poll(&polled, nfds_t(polled.count), Int32(min(waitMilliseconds, 60_000))) > 0 else { continue }
            var finished: [Int32] = []
            for (index, pipe) in pipes.enumerated() where polled[index].revents != 0 {
                if !Self.drain(pipe.fd, pipe.stream, into: &output) { finished.append(pipe.fd) }
            }
            for fd in finished { close(fd) }
            pipes.removeAll { finished.contains($0.fd) }
        }
    }

    private func reap(blocking: Bool) -> ChildEnd? {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            if result == pid { break }
            if result == -1 && errno == EINTR { continue }
            // ECHILD: someone else reaped it (nothing in brokerd does); treat it as gone.
            return result == 0 ? nil : .exited(status: -1)
        }
        let signal = status & 0x7f
        return signal == 0 ? .exited(status: (status >> 8) & 0xff) : .killedBySignal(signal)
    }

    /// Reads what `fd` has now; false at end-of-file or an error (the pipe is done).
    private static func drain(_ fd: Int32, _ stream: ChildStream, into output: inout OutputLines) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                output.append(buffer[0..<count], from: stream)
                continue
            }
            if count == -1 && errno == EINTR { continue }
            return count == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)
        }
    }

    private static func monotonicMilliseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }
}

/// Splits each stream's bytes into lines and passes them on within `OutputLimits`.
struct OutputLines {
    let limits: OutputLimits
    let onLine: (ChildStream, String) -> Void
    private var pending: [ChildStream: [UInt8]] = [:]
    /// A stream whose current line was cut: the rest of it, up to the newline, is dropped.
    private var cutting: Set<ChildStream> = []
    private var passedBytes = 0
    private(set) var droppedBytes = 0

    init(limits: OutputLimits, onLine: @escaping (ChildStream, String) -> Void) {
        self.limits = limits
        self.onLine = onLine
    }

    mutating func append(_ bytes: ArraySlice<UInt8>, from stream: ChildStream) {
        var line = pending[stream] ?? []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                if cutting.remove(stream) == nil { emit(line, stream) }
                line.removeAll(keepingCapacity: true)
            } else if cutting.contains(stream) {
                droppedBytes += 1
            } else if line.count == limits.maximumLineBytes {
                emit(line + Array(" [cut]".utf8), stream)
                line.removeAll(keepingCapacity: true)
                cutting.insert(stream)
                droppedBytes += 1
            } else {
                line.append(byte)
            }
        }
        pending[stream] = line
    }

    /// Passes on what is left of unfinished lines.
    mutating func finish() {
        for stream in [ChildStream.stdout, .stderr] {
            if let line = pending[stream], !line.isEmpty, !cutting.contains(stream) { emit(line, stream) }
        }
        pending = [:]
    }

    private mutating func emit(_ bytes: [UInt8], _ stream: ChildStream) {
        var text = String(decoding: bytes, as: UTF8.self)
        if text.hasSuffix("\r") { text.removeLast() }
        guard !text.isEmpty else { return }
        guard passedBytes + bytes.count <= limits.maximumTotalBytes else {
            droppedBytes += bytes.count
            return
        }
        passedBytes += bytes.count
        onLine(stream, text)
    }
}

/// `strings` as a NULL-terminated array of C strings (argv, envp), valid while `body` runs.
private func withCStrings<Result>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Result) -> Result {
    let pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
    defer { pointers.forEach { free($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
