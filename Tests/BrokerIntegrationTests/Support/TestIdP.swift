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

    let server: FixtureServer
    let http: String
    let https: String
    let caFile: String
    var directory: TemporaryDirectory { server.directory }

    /// Starts the IdP; `environment` sets lifetimes (ACCESS_TOKEN_EXPIRE_SECONDS, DEVICE_FLOW_INTERVAL, …).
    init(environment extra: [String: String] = [:]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw missing("the test IdP's venv is missing (\(Self.python)); scripts/test.sh makes it")
        }
        var environment = ProcessInfo.processInfo.environment
        environment["DEVICE_FLOW_INTERVAL"] = "1"
        for (key, value) in extra { environment[key] = value }
        server = try FixtureServer(name: "idp", command: [Self.python, Self.root + "/Tests/idp/serve.py"], environment: environment)
        http = server.http
        https = server.ready["https"] as? String ?? ""
        caFile = server.ready["ca"] as? String ?? ""
    }

    /// Stops the IdP (the "IdP down" case); idempotent.
    func stop() { server.stop() }

    /// POSTs a form to the IdP's token endpoint, as a client other than brokerd would; returns the JSON answer.
    func tokenEndpoint(_ fields: [String: String]) throws -> [String: Any] {
        let result = try runCommand("/usr/bin/curl", ["-sS", "--max-time", "30", http + "/token/"]
            + fields.sorted(by: { $0.key < $1.key }).flatMap { ["--data-urlencode", "\($0.key)=\($0.value)"] })
        return (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
    }

    @discardableResult
    func control(_ path: String, post: Bool = true) throws -> [String: Any] { try server.control(path, post: post) }

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
