import Foundation
import XCTest

/// A tool the test needs from Debian: its path, or what is `missing` (a failure under CI, else a skip naming the package).
func requireTool(_ path: String, package: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
    if FileManager.default.isExecutableFile(atPath: path) { return path }
    throw missing("\(path) is missing (apt-get install \(package))", file: file, line: line)
}

/// A Flatpak app's sandbox as Flatpak builds one, with bubblewrap (Debian `bubblewrap`, the tool Flatpak itself runs):
/// a root of its own (a tmpfs), the host's /usr and /etc read-only, its own pid and mount namespaces, and a
/// `/.flatpak-info` of its own naming the app. Processes started in it are, to brokerd, that app.
struct FlatpakSandbox {
    let appId: String
    let infoPath: String
    let bwrap: String

    /// `extraInfo`: more key-file text (`[Context]` sockets, `[Session Bus Policy]`…).
    init(appId: String, in directory: String, extraInfo: String = "", file: StaticString = #filePath, line: UInt = #line) throws {
        bwrap = try requireTool("/usr/bin/bwrap", package: "bubblewrap", file: file, line: line)
        self.appId = appId
        infoPath = directory + "/\(appId).flatpak-info"
        let info = """
            [Application]
            name=\(appId)
            runtime=runtime/org.freedesktop.Platform/x86_64/23.08

            [Instance]
            instance-id=\(UInt32.random(in: 1 ... .max))
            flatpak-version=1.14.10

            \(extraInfo)
            """
        try info.write(toFile: infoPath, atomically: true, encoding: .utf8)
    }

    /// The bwrap command that runs `command` in the sandbox; `binds` are host paths bound at the same path (read-write),
    /// `sharePid` keeps the host's pid namespace (as Flatpak runs its D-Bus proxy).
    func command(_ command: [String], binds: [String] = [], bindsAt: [(String, String)] = [], sharePid: Bool = false) -> [String] {
        var arguments = [bwrap, "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                         "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--ro-bind", "/etc", "/etc",
                         "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", infoPath, "/.flatpak-info",
                         "--ro-bind", TestIdP.root + "/Tests/apps", "/app/tests", "--die-with-parent"]
        if !sharePid { arguments.append("--unshare-pid") }
        for path in binds { arguments += ["--bind", path, path] }
        for (host, inside) in bindsAt { arguments += ["--bind", host, inside] }
        return arguments + ["--"] + command
    }

    /// Runs Tests/apps/app_client.py in the sandbox against brokerd's socket (its directory bound in).
    func appClient(_ daemon: Daemon, _ arguments: [String], binds: [String] = []) throws -> [[String: Any]] {
        try AppClient.run(clientCommand(daemon, arguments, binds: binds))
    }

    func clientCommand(_ daemon: Daemon, _ arguments: [String], binds: [String] = []) -> [String] {
        let socketDirectory = (daemon.socket as NSString).deletingLastPathComponent
        return command(["/usr/bin/python3", "/app/tests/app_client.py", daemon.socket] + arguments, binds: [socketDirectory] + binds)
    }
}

/// Tests/apps/app_client.py on the host.
enum AppClient {
    static func run(_ daemon: Daemon, _ arguments: [String], python: String = "/usr/bin/python3") throws -> [[String: Any]] {
        try run([python, TestIdP.root + "/Tests/apps/app_client.py", daemon.socket] + arguments)
    }

    static func run(_ command: [String]) throws -> [[String: Any]] {
        let result = try runCommand(command[0], Array(command.dropFirst()))
        XCTAssertEqual(result.status, 0, result.stderr)
        return answers(result.stdout)
    }

    /// Runs `command` on another thread; the returned function waits for its answers.
    static func inBackground(_ command: [String]) -> () -> [[String: Any]] {
        final class Box: @unchecked Sendable { var output = "" }
        let box = Box(), done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            box.output = (try? runCommand(command[0], Array(command.dropFirst())))?.stdout ?? ""
            done.signal()
        }
        return {
            XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "the app never got its answer")
            return answers(box.output)
        }
    }

    static func answers(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }
}
