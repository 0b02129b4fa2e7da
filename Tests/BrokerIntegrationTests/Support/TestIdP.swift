import Foundation
import XCTest

/// The real OAuth 2.0 / OIDC server of Tests/idp (django-oauth-toolkit) on 127.0.0.1, one per test.
/// Its Python venv is made by scripts/test.sh (`$BROKERD_IDP_PYTHON`, default `.build/idp-venv/bin/python`).
final class TestIdP {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    static var python: String {
        ProcessInfo.processInfo.environment["BROKERD_IDP_PYTHON"] ?? root + "/.build/idp-venv/bin/python"
    }
    static var fakeBrowser: String { root + "/Tests/idp/fake_browser.py" }

    let directory = TemporaryDirectory("brokerd-idp")
    let process: ChildProcess
    let http: String
    let https: String
    let caFile: String

    /// Starts the IdP; `environment` sets lifetimes (ACCESS_TOKEN_EXPIRE_SECONDS, DEVICE_FLOW_INTERVAL, …).
    init(environment extra: [String: String] = [:]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw XCTSkip("the test IdP's venv is missing (\(Self.python)); scripts/test.sh makes it")
        }
        var environment = ProcessInfo.processInfo.environment
        environment["DEVICE_FLOW_INTERVAL"] = "1"
        for (key, value) in extra { environment[key] = value }
        process = try ChildProcess(Self.python, [Self.root + "/Tests/idp/serve.py", "--state-dir", directory.path],
                                   environment: environment, logPath: directory.path + "/idp.log")
        let ready = directory.path + "/ready.json"
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: ready) {
            guard process.isRunning, Date() < deadline else {
                let log = (try? String(contentsOfFile: directory.path + "/idp.log", encoding: .utf8)) ?? ""
                throw NSError(domain: "TestIdP", code: 1, userInfo: [NSLocalizedDescriptionKey: "the test IdP did not start: \(log)"])
            }
            usleep(50_000)
        }
        let info = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: ready))) as! [String: Any]
        http = info["http"] as! String
        https = info["https"] as! String
        caFile = info["ca"] as! String
    }

    deinit { stop() }

    /// Stops the IdP (the "IdP down" case); idempotent.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }

    /// POSTs a form to the IdP's token endpoint, as a client other than brokerd would; returns the JSON answer.
    func tokenEndpoint(_ fields: [String: String]) throws -> [String: Any] {
        let result = try runCommand("/usr/bin/curl", ["-sS", "--max-time", "30", http + "/token/"]
            + fields.sorted(by: { $0.key < $1.key }).flatMap { ["--data-urlencode", "\($0.key)=\($0.value)"] })
        return (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
    }

    /// POSTs to a test-control endpoint (`/test/…`) and returns the JSON answer.
    @discardableResult
    func control(_ path: String, post: Bool = true) throws -> [String: Any] {
        let result = try runCommand("/usr/bin/curl", ["-sS", "--max-time", "30"] + (post ? ["-X", "POST"] : []) + [http + path])
        guard result.status == 0, let data = result.stdout.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw NSError(domain: "TestIdP", code: 2, userInfo: [NSLocalizedDescriptionKey: "\(path): \(result.stdout) \(result.stderr)"])
        }
        return object
    }

    /// Token-endpoint requests of one grant type since the last reset.
    func tokenRequests(_ grantType: String) throws -> Int {
        let counts = try control("/test/requests", post: false)["by_grant_type"] as? [String: Int]
        return counts?[grantType] ?? 0
    }

    /// The brokerd configuration for this IdP, with `open_browser = "always"` and the scripted browser; `extra`
    /// holds more top-level settings.
    func brokerConfig(https useHTTPS: Bool = false, extra: String = "") -> String {
        """
        default_authority = "\(useHTTPS ? https : http)"
        allow_loopback_http = true
        ca_file = "\(caFile)"
        open_browser = "always"
        interactive_timeout = 60
        \(extra)
        [profile.mail]
        client_id = "brokerd-test-app-a"
        scopes = ["mail.read"]
        """
    }

    /// Environment for brokerd: $BROWSER is the scripted browser that signs in as `user`.
    func browserEnvironment(user: String = "alice") -> [String: String] {
        ["BROWSER": Self.fakeBrowser, "IDP_USER": user, "IDP_CA": caFile,
         "IDP_BROWSER_LOG": directory.path + "/browser.log"]
    }
}
