import Foundation

/// A long-running child (brokerd, or a launcher that execs it) started with posix_spawn and reaped with waitpid.
///
/// Foundation's `Process` cannot be used for these: it learns that a child ended when a close-on-exec descriptor
/// it passed is closed, so a child that execs again (systemd-socket-activate, setpriv) looks finished at once, and
/// Foundation then blocks its monitor thread in wait4() on it — every later `Process` of the test hangs with it.
final class ChildProcess: @unchecked Sendable {
    let processIdentifier: Int32
    private var status: Int32?

    /// Starts `executable` with stdin from /dev/null and stdout/stderr appended to `logPath`.
    init(_ executable: String, _ arguments: [String], environment: [String: String], logPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // A child inherits the spawning thread's blocked signals and ignored ones; XCTest's threads block some,
        // and a child that cannot see SIGTERM never stops. Start it with a clean slate.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: Int32 = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(result),
                          userInfo: [NSLocalizedDescriptionKey: "posix_spawn \(executable): \(String(cString: strerror(result)))"])
        }
        processIdentifier = pid
    }

    deinit {
        if isRunning {
            kill(processIdentifier, SIGKILL)
            waitUntilExit()
        }
    }

    var isRunning: Bool {
        if status != nil { return false }
        var raw: Int32 = 0
        let reaped = waitpid(processIdentifier, &raw, WNOHANG)
        if reaped == processIdentifier { status = raw; return false }
        return reaped == 0
    }

    func waitUntilExit() {
        guard status == nil else { return }
        var raw: Int32 = 0
        while waitpid(processIdentifier, &raw, 0) < 0 && errno == EINTR {}
        status = raw
    }

    /// The exit code, or 128 + the signal that ended it (as a shell reports it).
    var terminationStatus: Int32 {
        guard let raw = status else { return -1 }
        let signal = raw & 0x7F
        return signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
    }
}
