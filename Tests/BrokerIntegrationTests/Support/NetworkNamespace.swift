import Foundation
import XCTest

/// A network namespace of the test's own (an unprivileged user namespace: `unshare -rn`), with only a loopback
/// link, which the test takes down and up again: a network that dies and comes back, for brokerd and the identity
/// provider inside it, while the rest of the machine keeps its network. The namespace lives as long as its holder
/// process (`sleep`).
final class NetworkNamespace {
    private let holder: ChildProcess
    private let directory = TemporaryDirectory("brokerd-netns")

    init() throws {
        let unshare = try requireTool("/usr/bin/unshare", package: "util-linux")
        _ = try requireTool("/usr/bin/nsenter", package: "util-linux")
        _ = try requireTool("/usr/sbin/ip", package: "iproute2")
        holder = try ChildProcess(unshare, ["-rn", "sleep", "3600"], environment: ProcessInfo.processInfo.environment,
                                  logPath: directory.path + "/holder.log")
        // The holder is in its namespace once its ns/net link differs from ours (unshare execs sleep after unsharing).
        let ours = readlink("/proc/self/ns/net")
        var entered = false
        for _ in 0..<500 where !entered {
            let theirs = readlink("/proc/\(holder.processIdentifier)/ns/net")
            entered = theirs != nil && theirs != ours
            if !entered { usleep(10_000) }
        }
        guard entered else { throw missing("cannot make a network namespace here (unshare -rn)") }
        try setLoopback(up: true)
    }

    deinit {
        if holder.isRunning {
            kill(holder.processIdentifier, SIGKILL)
            holder.waitUntilExit()
        }
    }

    /// Runs the rest of a command inside the namespace (as this user, with its own capabilities there).
    var enter: [String] {
        ["/usr/bin/nsenter", "-t", "\(holder.processIdentifier)", "-U", "-n", "--preserve-credentials"]
    }

    func run(_ command: [String]) throws -> CommandResult {
        let full = enter + command
        return try runCommand(full[0], Array(full.dropFirst()))
    }

    /// The namespace's only link: down is a dead network (connections fail at once), up is its return.
    func setLoopback(up: Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try run(["/usr/sbin/ip", "link", "set", "lo", up ? "up" : "down"])
        XCTAssertEqual(result.status, 0, result.stderr, file: file, line: line)
    }

    private func readlink(_ path: String) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: path)
    }
}
