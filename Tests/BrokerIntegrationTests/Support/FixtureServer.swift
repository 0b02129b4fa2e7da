import Foundation

/// A test server of ours (Tests/idp, Tests/entra) as a child process: started with `--state-dir`, ready when it
/// has written `ready.json`, driven through its `/test/…` control endpoints, stopped with SIGTERM.
final class FixtureServer {
    let directory: TemporaryDirectory
    let process: ChildProcess
    /// The parsed `ready.json` (`http`, `https`, `ca`, `pid`).
    let ready: [String: Any]
    let http: String
    /// Runs the control requests' curl (`nsenter …` when the server lives in a network namespace of its own).
    let controlPrefix: [String]

    /// `prefix` runs the server and its control requests (`nsenter …` into a network namespace).
    init(name: String, command: [String], environment: [String: String], prefix: [String] = []) throws {
        controlPrefix = prefix
        let command = prefix + command
        directory = TemporaryDirectory("brokerd-\(name)")
        let log = directory.path + "/\(name).log"
        process = try ChildProcess(command[0], Array(command.dropFirst()) + ["--state-dir", directory.path],
                                   environment: environment, logPath: log)
        let readyPath = directory.path + "/ready.json"
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: readyPath) {
            guard process.isRunning, Date() < deadline else {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw NSError(domain: name, code: 1, userInfo: [NSLocalizedDescriptionKey: "\(name) did not start: \(text)"])
            }
            usleep(50_000)
        }
        ready = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: readyPath))) as? [String: Any] ?? [:]
        http = ready["http"] as? String ?? ""
    }

    deinit { stop() }

    /// Idempotent.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }

    /// Calls a test-control endpoint (`/test/…`, POST unless `post` is false) and returns its JSON answer.
    @discardableResult
    func control(_ path: String, post: Bool = true) throws -> [String: Any] {
        let curl = ["/usr/bin/curl", "-sS", "--max-time", "30"] + (post ? ["-X", "POST"] : []) + [http + path]
        let command = controlPrefix + curl
        let result = try runCommand(command[0], Array(command.dropFirst()))
        guard result.status == 0, let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            throw NSError(domain: "FixtureServer", code: 2, userInfo: [NSLocalizedDescriptionKey: "\(path): \(result.stdout) \(result.stderr)"])
        }
        return object
    }
}
