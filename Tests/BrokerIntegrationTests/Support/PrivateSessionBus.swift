import Foundation
import XCTest

/// A `dbus-daemon --session` of the test's own (its socket in a temporary directory), optionally with an unlocked
/// gnome-keyring as the Secret Service (what pymsalruntime keeps its cache in). Stopped when it goes.
final class PrivateSessionBus {
    let directory = TemporaryDirectory("brokerd-bus")
    let address: String
    private var processes: [ChildProcess] = []
    private var secretService: ChildProcess?

    /// `configuration` (given the bus's socket path) replaces the standard session configuration: see
    /// `sessionConfiguration`. The bus logs to `log` (activations among them).
    init(configuration: ((_ socketPath: String) -> String)? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") else {
            throw missing("dbus-daemon is not installed (apt-get install dbus-daemon)")
        }
        let path = directory.path + "/bus"
        address = "unix:path=\(path)"
        // Services it activates (gnome-keyring for org.freedesktop.secrets) get the bus's HOME and runtime directory.
        var arguments = ["--session", "--address=\(address)"]
        if let configuration {
            let file = directory.path + "/bus.conf"
            try configuration(path).write(toFile: file, atomically: true, encoding: .utf8)
            arguments = ["--config-file=\(file)"]
        }
        processes.append(try ChildProcess("/usr/bin/dbus-daemon", arguments + ["--nofork", "--nopidfile"],
                                          environment: environment, logPath: directory.path + "/dbus.log"))
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: path) { usleep(10_000) }
        guard FileManager.default.fileExists(atPath: path) else { throw missing("the private session bus did not start") }
    }

    /// A session bus listening on `socketPath`, with activatable services only from `serviceDirectory` (none of the
    /// machine's) and, with `anyUser`, open to connections of every uid (the default lets only the bus's own uid in).
    static func sessionConfiguration(socketPath: String, serviceDirectory: String? = nil, anyUser: Bool = false) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(socketPath)</listen>
          \(serviceDirectory.map { "<servicedir>\($0)</servicedir>" } ?? "")
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
            \(anyUser ? #"<allow user="*"/>"# : "")
          </policy>
        </busconfig>
        """
    }

    var log: String { (try? String(contentsOfFile: directory.path + "/dbus.log", encoding: .utf8)) ?? "" }

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
            throw missing("gnome-keyring is not installed")
        }
        let keyring = try ChildProcess("/bin/sh", ["-c", "printf fake-keyring-password | exec /usr/bin/gnome-keyring-daemon --unlock --components=secrets --foreground"],
                                       environment: environment, logPath: directory.path + "/keyring.log")
        processes.append(keyring)
        secretService = keyring
        // Ready once it answers: owning the name comes before gnome-keyring can serve a session (a brokerd started at
        // that moment once saw its OpenSession dropped, "recipient disconnected … without replying").
        var lastError = ""
        for _ in 0..<500 {
            let session = try busctl(["call", "org.freedesktop.secrets", "/org/freedesktop/secrets",
                                      "org.freedesktop.Secret.Service", "OpenSession", "sv", "plain", "s", ""])
            if session.status == 0 { return }
            lastError = session.stderr
            usleep(20_000)
        }
        let log = (try? String(contentsOfFile: directory.path + "/keyring.log", encoding: .utf8)) ?? "(no keyring.log)"
        XCTFail("the Secret Service did not answer on the private bus: \(lastError)\nkeyring.log:\n\(log.suffix(2000))")
    }

    /// Stops every gnome-keyring of this bus (the one `startSecretService` started detaches from its launcher, and the
    /// bus may have activated another) and waits until org.freedesktop.secrets has no owner.
    func stopSecretService() throws {
        secretService = nil
        let marker = Array("DBUS_SESSION_BUS_ADDRESS=\(address)".utf8)
        let keyrings = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap(Int32.init).filter { pid in
            guard let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                  String(decoding: command, as: UTF8.self).contains("gnome-keyring-daemon"),
                  let environment = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return false }
            return environment.split(separator: 0).contains { Array($0) == marker }
        }
        for pid in keyrings { kill(pid, SIGTERM) }
        try waitFor("gnome-keyring to stop") {
            let stillOwned = try busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                         "NameHasOwner", "s", "org.freedesktop.secrets"]).stdout
            return stillOwned.contains("false")
        }
    }

    /// Where gnome-keyring keeps its keyrings (under the bus's HOME): moved aside and back, it is another keyring.
    var keyringsDirectory: String { directory.path + "/.local/share/keyrings" }

    /// busctl (a real D-Bus client) against this bus.
    func busctl(_ arguments: [String]) throws -> CommandResult {
        try runCommand("/usr/bin/busctl", ["--address=\(address)"] + arguments)
    }
}

extension PrivateSessionBus {
    /// One method of com.microsoft.identity.Broker1 through busctl (`prefix` runs it, e.g. setpriv as another uid):
    /// the reply's JSON object, or nil when the call failed (busctl's message is in `result.stderr`).
    func broker1(_ method: String, _ request: String, correlationId: String = "9d0c7e4e-5f44-4b0e-9a39-3c1b1fd1a7c2",
                 signature: String = "sss", prefix: [String] = []) throws -> (answer: [String: Any]?, result: CommandResult) {
        let command = prefix + ["/usr/bin/busctl", "--address=\(address)", "--json=short", "call", DBusName.name,
                                DBusName.path, DBusName.interface, method, signature]
            + (signature == "sss" ? ["0.0", correlationId, request] : [request])
        let result = try runCommand(command[0], Array(command.dropFirst()))
        guard result.status == 0,
              let reply = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let text = (reply["data"] as? [String])?.first else { return (nil, result) }
        return ((try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any], result)
    }

    /// Waits until someone owns com.microsoft.identity.broker1 on this bus (brokerd takes it after its socket).
    func waitForBroker(file: StaticString = #filePath, line: UInt = #line) throws {
        for _ in 0..<1_000 {
            if try busctl(["status", DBusName.name]).status == 0 { return }
            usleep(20_000)
        }
        XCTFail("nobody took \(DBusName.name) on the private bus", file: file, line: line)
    }
}

/// brokerd's address on the bus.
enum DBusName {
    static let name = "com.microsoft.identity.broker1"
    static let path = "/com/microsoft/identity/broker1"
    static let interface = "com.microsoft.identity.Broker1"
}

/// The real MSAL client's Python: msal and pymsalruntime from PyPI in the venv scripts/test.sh makes
/// (`$BROKERD_MSAL_PYTHON`). The tests that need it skip, saying why, without it.
func msalPython() throws -> String {
    guard let python = ProcessInfo.processInfo.environment["BROKERD_MSAL_PYTHON"] else {
        throw missing("BROKERD_MSAL_PYTHON is not set (scripts/test.sh makes .build/msal-venv with msal and pymsalruntime)")
    }
    return python
}
