import Foundation
import XCTest

/// Our Entra emulator (Tests/entra, Python standard library) on 127.0.0.1; brokerd reaches it through
/// `microsoft_base_url`, so the cache keeps `login.microsoftonline.com`.
final class TestEntra {
    static let famA = "aaaaaaaa-0000-0000-0000-00000000000a"
    static let famB = "bbbbbbbb-0000-0000-0000-00000000000b"
    static let nonFamily = "cccccccc-0000-0000-0000-00000000000c"
    static let contoso = "11111111-1111-1111-1111-111111111111"
    static let fabrikam = "22222222-2222-2222-2222-222222222222"
    static let graph = "https://graph.microsoft.com/User.Read"

    let server: FixtureServer
    let http: String
    var directory: TemporaryDirectory { server.directory }

    /// `prefix` runs the emulator (and its control requests) in another network namespace (`NetworkNamespace.enter`).
    init(prefix: [String] = []) throws {
        server = try FixtureServer(name: "entra", command: ["/usr/bin/python3", TestIdP.root + "/Tests/entra/entra.py"],
                                   environment: ProcessInfo.processInfo.environment, prefix: prefix)
        http = server.http
    }

    @discardableResult
    func control(_ path: String, post: Bool = true) throws -> [String: Any] { try server.control(path, post: post) }

    /// Token-endpoint requests as the emulator logged them (never with secrets).
    func tokenRequests() throws -> [[String: Any]] {
        let recent = try control("/test/requests?limit=500", post: false)["recent"] as? [[String: Any]] ?? []
        return recent.filter { ($0["endpoint"] as? String) == "token" }
    }

    var brokerConfig: String {
        """
        microsoft_base_url = "\(http)"
        allow_loopback_http = true
        open_browser = "always"
        interactive_timeout = 60
        client_capabilities = ["cp1"]
        """
    }

    /// Starts brokerd for the emulator; the browser follows the emulator's redirects for the user set with `signIn`.
    /// `extraConfig` is appended to the configuration; `prefix` runs brokerd (see `Daemon.start`).
    func startBroker(extraConfig: String = "", prefix: [String] = []) throws -> Daemon {
        let daemon = try Daemon(config: brokerConfig + "\n" + extraConfig)
        daemon.environment = ["BROWSER": TestIdP.fakeBrowser, "IDP_BROWSER_LOG": directory.path + "/browser.log"]
        try daemon.start(prefix: prefix)
        return daemon
    }

    /// Interactive sign-in of `user` for `client` through brokerctl (the emulator signs the next browser in as `user`).
    func signIn(_ daemon: Daemon, user: String, client: String, authority: String = "https://login.microsoftonline.com/common",
                scopes: [String] = [graph]) throws -> CommandResult {
        try control("/test/next-signin?username=\(user)")
        return try daemon.ctl(["login", "--client-id", client, "--authority", authority, "--json"] + scopes.flatMap { ["--scope", $0] })
    }
}
