import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// brokerd with no way to its identity provider (issue #28): what the cache can answer is answered without the
/// network, what needs the network fails at once after the first failure, and a network that comes back (an
/// address, a resume from suspend) is tried again at once. Against the Entra emulator; the dead network is a host
/// that never answers (DeadHost), a network namespace whose only link goes down, or a delayed token endpoint.
final class OfflineTests: XCTestCase {
    private let alice = "alice@contoso.example"

    private func silent(_ daemon: Daemon, authority: String, forceRefresh: Bool = false) async throws -> TokenResult {
        try await BrokerConnection(socketPath: daemon.socket).call(.acquireTokenSilently, AcquireTokenSilentlyParams(
            clientId: TestEntra.famA, authority: authority, scopes: [TestEntra.graph], account: AccountReference(alice),
            forceRefresh: forceRefresh ? true : nil), as: TokenResult.self)
    }

    private func status(_ daemon: Daemon) throws -> StatusResult {
        let result = try daemon.ctl(["status", "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try decode(StatusResult.self, result.stdout)
    }

    /// The RPC error of a call that must fail.
    private func failure(_ body: () async throws -> Void) async -> RPCError? {
        do { try await body() } catch let BrokerClientError.rpc(error) { return error } catch {
            XCTFail("not an RPC error: \(error)")
            return nil
        }
        XCTFail("the call succeeded")
        return nil
    }

    // MARK: Learned facts across a restart

    /// A tenant named by its domain cost a discovery per call, and offline a stall per call. The tenant id it stands
    /// for is learned once, kept in the database with the discovery documents and the cloud's aliases, and used after
    /// a restart with the identity provider unreachable: the token comes from the cache and nothing goes out.
    func testATenantNamedByItsDomainIsAnsweredOfflineAfterARestart() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: alice, client: TestEntra.famA).status, 0, daemon.log)
        let byDomain = "https://login.microsoftonline.com/contoso.example"
        let online = try await silent(daemon, authority: byDomain)
        XCTAssertEqual(online.source, "cache", "the tenant id came from the tenant's discovery document")
        try waitFor("the tenant, a discovery document and the cloud's aliases learned") {
            let kinds = Set(try status(daemon).network?.learned.map(\.kind) ?? [])
            return kinds.isSuperset(of: ["tenant", "discovery", "aliases"])
        }
        let learned = try XCTUnwrap(status(daemon).network?.learned)
        XCTAssertTrue(learned.contains { $0.kind == "tenant" && $0.subject == "login.microsoftonline.com/contoso.example" },
                      "\(learned)")

        // Restarted with every Microsoft host going to a host that never answers.
        XCTAssertEqual(daemon.stop(), 0)
        let dead = try DeadHost()
        try (entra.brokerConfig.replacingOccurrences(of: entra.http, with: dead.url) + "\nrequest_timeout = 3")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try daemon.start()
        let offline = try await silent(daemon, authority: byDomain)
        XCTAssertEqual(offline.source, "cache")
        XCTAssertEqual(offline.accessToken, online.accessToken)
        XCTAssertTrue(offline.authority.hasSuffix("/\(TestEntra.contoso)"), offline.authority)
        let common = try await silent(daemon, authority: "https://login.microsoftonline.com/common")
        XCTAssertEqual(common.accessToken, online.accessToken)
        XCTAssertEqual(dead.connections, 0, "a request the cache answers never waits on the network: \(daemon.log)")

        // What needs the network fails as a network error, and the next call fails at once without trying again.
        let first = await failure { _ = try await self.silent(daemon, authority: byDomain, forceRefresh: true) }
        XCTAssertEqual(first?.code, -50006, "\(String(describing: first))")
        XCTAssertEqual(first?.data?.objectValue?["network"], .bool(true), "\(String(describing: first))")
        XCTAssertNotNil(first?.data?.objectValue?["retryAfter"]?.integerValue, "\(String(describing: first))")
        let tried = dead.connections
        XCTAssertGreaterThan(tried, 0, "the refresh went to the network")
        let second = await failure { _ = try await self.silent(daemon, authority: byDomain, forceRefresh: true) }
        XCTAssertEqual(second?.data?.objectValue?["network"], .bool(true))
        XCTAssertEqual(dead.connections, tried, "a host backing off is not tried again per call")
        let unreachable = try XCTUnwrap(status(daemon).network?.unreachableHosts.first, daemon.log)
        XCTAssertEqual(unreachable.failures, 1)
        XCTAssertGreaterThan(unreachable.retryAfter, 0)
        // The cache still answers meanwhile.
        let stillCached = try await silent(daemon, authority: byDomain)
        XCTAssertEqual(stillCached.accessToken, online.accessToken)
        XCTAssertFalse(daemon.log.contains(online.accessToken), "no token in the log")
    }

    // MARK: A network that dies and comes back

    /// brokerd and the emulator in a network namespace whose only link goes down: the background refresh fails, the
    /// host backs off, an app's call needing the network fails at once without a retry (the failure count stays 1).
    /// The link comes back: rtnetlink tells brokerd, which tries the waiting refresh at once (the next scheduled
    /// check is an hour away).
    func testARefreshWaitingOnADeadNetworkRunsWhenTheLinkComesBack() throws {
        let namespace = try NetworkNamespace()
        let entra = try TestEntra(prefix: namespace.enter)
        // Every token is due for renewal, but the scheduled checks are an hour apart: only a network change runs one.
        let daemon = try entra.startBroker(extraConfig: "refresh_check_interval = 3600\nrenew_ahead = 86400\nrequest_timeout = 5",
                                           prefix: namespace.enter)
        // brokerctl runs in the namespace too: brokerd identifies its callers through /proc, which a process of
        // another user namespace may not read.
        func ctl(_ arguments: [String]) throws -> CommandResult {
            try namespace.run([Binaries.brokerctl] + arguments + ["--socket", daemon.socket])
        }
        func unreachableHosts() throws -> [UnreachableHost] {
            let result = try ctl(["status", "--json"])
            XCTAssertEqual(result.status, 0, result.stderr)
            return try decode(StatusResult.self, result.stdout).network?.unreachableHosts ?? []
        }
        try entra.control("/test/next-signin?username=\(alice)")
        let login = try ctl(["login", "--client-id", TestEntra.famA, "--authority", "https://login.microsoftonline.com/common",
                             "--scope", TestEntra.graph])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let redeemed = try entra.tokenRequests().count

        try namespace.setLoopback(up: false)
        try waitFor("the background refresh to fail on the dead link") { daemon.log.contains("background refresh failed") }
        let call = try ctl(["token", "--client-id", TestEntra.famA, "--authority", "https://login.microsoftonline.com/common",
                            "--scope", TestEntra.graph, "--account", alice, "--force-refresh"])
        XCTAssertNotEqual(call.status, 0)
        XCTAssertTrue(call.stderr.contains("tried again in"), call.stderr)
        let unreachable = try XCTUnwrap(unreachableHosts().first, daemon.log)
        XCTAssertEqual(unreachable.failures, 1, "the app's call was not sent: \(unreachable)")

        try namespace.setLoopback(up: true)
        try waitFor("the waiting refresh to run when the link came back", timeout: 20) {
            try entra.tokenRequests().count > redeemed
        }
        XCTAssertTrue(daemon.log.contains("network changed"), daemon.log)
        XCTAssertEqual(try unreachableHosts().count, 0)
    }

    /// logind's PrepareForSleep(false) on the system bus (a private one here) is a resume: hosts backing off are tried
    /// again and the waiting background refresh runs at once. PrepareForSleep(true), going to sleep, does nothing.
    func testAResumeFromSuspendRetriesAWaitingRefresh() throws {
        let systemBus = try PrivateSessionBus()
        let entra = try TestEntra()
        let daemon = try Daemon(config: entra.brokerConfig + "\nrefresh_check_interval = 3600\nrenew_ahead = 86400\nrequest_timeout = 2")
        daemon.environment = ["BROWSER": TestIdP.fakeBrowser, "IDP_BROWSER_LOG": entra.directory.path + "/browser.log",
                              "DBUS_SYSTEM_BUS_ADDRESS": systemBus.address]
        try daemon.start()
        XCTAssertEqual(try entra.signIn(daemon, user: alice, client: TestEntra.famA).status, 0, daemon.log)

        func emitPrepareForSleep(_ sleeping: Bool) throws {
            let sent = try systemBus.busctl(["emit", "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                                             "PrepareForSleep", "b", sleeping ? "true" : "false"])
            XCTAssertEqual(sent.status, 0, sent.stderr)
        }
        // The token endpoint stops answering in time: the refresh that the resume starts fails and backs off.
        try entra.control("/test/delay?endpoint=token&ms=8000")
        try emitPrepareForSleep(true)
        try emitPrepareForSleep(false)
        try waitFor("the refresh started by the resume to fail") { daemon.log.contains("background refresh failed") }
        XCTAssertEqual(daemon.log.components(separatedBy: "network changed").count - 1, 1, "going to sleep is no resume")
        try entra.control("/test/delay?ms=0")
        let before = try entra.tokenRequests().filter { ($0["status"] as? Int) == 200 }.count

        try emitPrepareForSleep(false)
        try waitFor("the waiting refresh to run after the resume", timeout: 20) {
            try entra.tokenRequests().filter { ($0["status"] as? Int) == 200 }.count > before
        }

        // NetworkManager's StateChanged to connected (70) is a network change too; another state is not.
        for state in ["40", "70"] {
            let sent = try systemBus.busctl(["emit", "/org/freedesktop/NetworkManager", "org.freedesktop.NetworkManager",
                                             "StateChanged", "u", state])
            XCTAssertEqual(sent.status, 0, sent.stderr)
        }
        try waitFor("NetworkManager's connected state noticed") { daemon.log.contains("why=NetworkManager connected") }
        XCTAssertEqual(daemon.log.components(separatedBy: "why=NetworkManager connected").count - 1, 1, "only state 70")
    }

    // MARK: A caller that goes away

    /// An app that closes its connection while the sign-in's discovery is still waiting on the network ends the sign-in
    /// there (the request to the identity provider is dropped), instead of holding its client's sign-in slot.
    func testClosingTheSocketDuringDiscoveryEndsTheSignIn() throws {
        let dead = try DeadHost()
        let daemon = try Daemon(config: "allow_loopback_http = true\nrequest_timeout = 120\nopen_browser = \"never\"")
        try daemon.start()
        let client = try RawClient(daemon.socket)
        try client.send(#"{"jsonrpc":"2.0","id":1,"method":"acquireTokenInteractively","params":{"clientId":"app","#
                        + #""authority":"\#(dead.url)/tenant","scopes":["openid"],"flow":"deviceCode"}}"# + "\n")
        try waitFor("discovery to reach the dead host") { dead.connections == 1 }
        shutdown(client.fd, Int32(SHUT_RDWR))  // the app goes away
        try waitFor("brokerd to drop the discovery request", timeout: 15) { dead.closedByPeer == 1 }
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0, "serving still")
    }
}
