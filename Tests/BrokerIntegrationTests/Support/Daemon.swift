import Foundation
import XCTest

/// Where `swift build` put brokerd and brokerctl: beside the test bundle, or `$BROKERD_BIN_DIR`.
enum Binaries {
    static let directory: String = {
        if let dir = ProcessInfo.processInfo.environment["BROKERD_BIN_DIR"] { return dir }
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.isExecutableFile(atPath: url.appendingPathComponent("brokerd").path) { return url.path }
        }
        return FileManager.default.currentDirectoryPath + "/.build/debug"
    }()

    static var brokerd: String { directory + "/brokerd" }
    static var brokerctl: String { directory + "/brokerctl" }
    static var profileExample: String { directory + "/profile-example" }
}

/// A temporary directory removed when the test ends.
final class TemporaryDirectory {
    let path: String

    init(_ name: String = "brokerd-test") {
        let template = NSTemporaryDirectory() + "\(name)-XXXXXX"
        var bytes = Array(template.utf8CString)
        path = bytes.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A real brokerd process on a temporary socket and state directory.
final class Daemon {
    let directory: TemporaryDirectory
    let socket: String
    let stateDir: String
    let configPath: String
    let logPath: String
    private(set) var process: ChildProcess?
    /// Extra environment for brokerd (e.g. $BROWSER for interactive tests).
    var environment: [String: String] = [:]

    init(config: String = "", directory: TemporaryDirectory = TemporaryDirectory()) throws {
        self.directory = directory
        socket = directory.path + "/run/brokerd.sock"
        stateDir = directory.path + "/state"
        configPath = directory.path + "/config.toml"
        logPath = directory.path + "/brokerd.log"
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    deinit {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Added to brokerd's arguments (e.g. --dbus-broker).
    var extraArguments: [String] = []

    var arguments: [String] {
        ["--socket", socket, "--state-dir", stateDir, "--config", configPath, "--log-level", "debug"] + extraArguments
    }

    /// Starts brokerd and waits until it answers on its socket. `prefix` is a command that runs brokerd (unshare …).
    @discardableResult
    func start(prefix: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> ChildProcess {
        let process = try launch(prefix: prefix)
        self.process = process
        try waitUntilServing(file: file, line: line)
        return process
    }

    /// Starts brokerd without waiting (for tests of refusals). `executable` may be a launcher that execs brokerd
    /// (systemd-socket-activate); `prefix` is a command that runs the rest (setpriv …).
    func launch(arguments extra: [String]? = nil, executable: String = Binaries.brokerd,
                prefix: [String] = []) throws -> ChildProcess {
        let command = prefix + [executable] + (extra ?? arguments)
        var environment = ProcessInfo.processInfo.environment
        for name in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM", "WATCHDOG_USEC",
                     "DBUS_SESSION_BUS_ADDRESS", "DBUS_STARTER_ADDRESS", "DBUS_STARTER_BUS_TYPE"] {
            environment.removeValue(forKey: name)
        }
        // The key store (`auto`) and the D-Bus front end (on by default) look at the session bus: never the one of the
        // machine running the tests. Neither the address nor the user bus ($XDG_RUNTIME_DIR/bus) exists here; a test
        // that wants a bus sets its private bus's DBUS_SESSION_BUS_ADDRESS in `environment`.
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(directory.path)/no-session-bus"
        // Nor the machine's system bus (logind's resume, NetworkManager): a test that wants one gives its own.
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(directory.path)/no-system-bus"
        environment["XDG_RUNTIME_DIR"] = directory.path + "/run"
        for (key, value) in self.environment { environment[key] = value }
        return try ChildProcess(command[0], Array(command.dropFirst()), environment: environment, logPath: logPath)
    }

    func waitUntilServing(timeout: TimeInterval = 20, file: StaticString = #filePath, line: UInt = #line) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            // Any JSON-RPC answer means it serves (a refusal of this test process's uid included).
            if let client = try? RawClient(socket),
               let answer = try? client.call(#"{"jsonrpc":"2.0","id":0,"method":"getBrokerVersion"}"#),
               answer["result"] != nil || answer["error"] != nil {
                return
            }
            if let process, !process.isRunning {
                XCTFail("brokerd exited with \(process.terminationStatus): \(log)", file: file, line: line)
                throw RawClient.Failure.closed
            }
            usleep(20_000)
        }
        XCTFail("brokerd did not serve \(socket) within \(timeout) s: \(log)", file: file, line: line)
        throw RawClient.Failure.timeout
    }

    /// Sends `signal` and returns the exit status.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM) -> Int32 {
        guard let process else { return -1 }
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        self.process = nil
        return process.terminationStatus
    }

    var pid: Int32 { process?.processIdentifier ?? -1 }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Runs brokerctl against this daemon.
    func ctl(_ arguments: [String], stdin: String? = nil) throws -> CommandResult {
        try runCommand(Binaries.brokerctl, arguments + ["--socket", socket], stdin: stdin)
    }
}

struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// A program left running while the test acts around it, then waited for with its output (`finish`); terminated
/// if the test ends first.
final class RunningCommand {
    let process = Process()
    private let output = Pipe(), errors = Pipe()

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    deinit { if process.isRunning { process.terminate() } }

    /// Waits for it to exit: its status and output.
    func finish() -> CommandResult { waitWithOutput(process, output, errors) }
}

/// Reads both pipes before waiting, so that a chatty child cannot block on a full pipe; then its status.
private func waitWithOutput(_ process: Process, _ output: Pipe, _ errors: Pipe) -> CommandResult {
    final class Collected: @unchecked Sendable { var data = Data() }
    let stderrData = Collected(), group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async {
        stderrData.data = errors.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    let stdoutData = output.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                         stderr: String(decoding: stderrData.data, as: UTF8.self))
}

/// Runs a program to completion, capturing its output.
func runCommand(_ executable: String, _ arguments: [String], stdin: String? = nil,
         environment: [String: String]? = nil) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe(), input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    return waitWithOutput(process, out, err)
}
