import Foundation
import XCTest

/// A `dbus-daemon --session` of the test's own (its socket in a temporary directory), optionally with an unlocked
/// gnome-keyring as the Secret Service (what pymsalruntime keeps its cache in). Stopped when it goes.
final class PrivateSessionBus {
    let directory = TemporaryDirectory("brokerd-bus")
    let address: String
    private var processes: [ChildProcess] = []

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") else {
            throw XCTSkip("dbus-daemon is not installed (apt-get install dbus-daemon)")
        }
        let path = directory.path + "/bus"
        address = "unix:path=\(path)"
        // Services it activates (gnome-keyring for org.freedesktop.secrets) get the bus's HOME and runtime directory.
        processes.append(try ChildProcess("/usr/bin/dbus-daemon", ["--session", "--address=\(address)", "--nofork", "--nopidfile"],
                                          environment: environment, logPath: directory.path + "/dbus.log"))
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: path) { usleep(10_000) }
        guard FileManager.default.fileExists(atPath: path) else { throw XCTSkip("the private session bus did not start") }
    }

    deinit {
        for process in processes.reversed() where process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
    }

    /// What a client on this bus needs; HOME and XDG_RUNTIME_DIR are the bus's directory, so that the keyring and
    /// anything else per user stays inside the test.
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = address
        environment["HOME"] = directory.path
        environment["XDG_RUNTIME_DIR"] = directory.path
        return environment
    }

    /// Starts gnome-keyring's Secret Service on this bus, unlocked, and waits for org.freedesktop.secrets.
    func startSecretService() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gnome-keyring-daemon") else {
            throw XCTSkip("gnome-keyring is not installed")
        }
        processes.append(try ChildProcess("/bin/sh", ["-c", "printf fake-keyring-password | exec /usr/bin/gnome-keyring-daemon --unlock --components=secrets --foreground"],
                                          environment: environment, logPath: directory.path + "/keyring.log"))
        for _ in 0..<500 {
            let names = try runCommand("/usr/bin/busctl", ["--address=\(address)", "list", "--acquired"])
            if names.stdout.contains("org.freedesktop.secrets") { return }
            usleep(20_000)
        }
        XCTFail("the Secret Service did not appear on the private bus")
    }

    /// busctl (a real D-Bus client) against this bus.
    func busctl(_ arguments: [String]) throws -> CommandResult {
        try runCommand("/usr/bin/busctl", ["--address=\(address)"] + arguments)
    }
}
