import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// Token acquisition end to end: the real brokerd against the real test IdP (django-oauth-toolkit on 127.0.0.1),
/// the browser played by Tests/idp/fake_browser.py, which signs in on the IdP's login form as a person would.
final class TokenEngineTests: XCTestCase {
    private let client = testClient

    func testBrowserSignInThenCacheThenRefreshWithRotation() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let connection = BrokerConnection(socketPath: daemon.socket)

        // Interactive sign-in with the system browser (brokerd runs $BROWSER) through brokerctl.
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let signedIn = try decode(TokenResult.self, login.stdout)
        XCTAssertEqual(signedIn.source, "interactive")
        XCTAssertEqual(signedIn.account.username, "alice")
        XCTAssertTrue(login.stderr.contains("/authorize/"), "the browser URL is shown to the user: \(login.stderr)")
        XCTAssertTrue(signedIn.grantedScopes.contains("mail.read"))
        XCTAssertGreaterThan(signedIn.expiresOn, Int64(Date().timeIntervalSince1970) + 3000)
        let account = signedIn.account.homeAccountId

        // Silent: straight from the cache, no IdP request.
        try idp.control("/test/reset-counters")
        let cached = try await silent(connection, account: account)
        XCTAssertEqual(cached.source, "cache")
        XCTAssertEqual(cached.accessToken, signedIn.accessToken)
        XCTAssertNotNil(cached.idToken)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 0)

        // brokerctl token prints exactly the access token.
        let printed = try daemon.ctl(["token", "mail", "--config", daemon.configPath])
        XCTAssertEqual(printed.status, 0, printed.stderr)
        XCTAssertEqual(printed.stdout, signedIn.accessToken + "\n")

        // forceRefresh redeems the refresh token; the rotated one replaces it in place.
        let refreshTokenBefore = try await refreshTokens(connection)
        let refreshed = try await silent(connection, account: account, forceRefresh: true)
        XCTAssertEqual(refreshed.source, "refresh")
        XCTAssertNotEqual(refreshed.accessToken, signedIn.accessToken)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 1)
        let refreshTokenAfter = try await refreshTokens(connection)
        XCTAssertEqual(refreshTokenBefore.count, 1)
        XCTAssertEqual(refreshTokenAfter.count, 1, "rotation replaces the used refresh token, it adds none")
        XCTAssertNotEqual(refreshTokenBefore, refreshTokenAfter)

        // The new access token is the cached one now; a second refresh with the rotated token works (no reuse).
        let again = try await silent(connection, account: account)
        XCTAssertEqual(again.accessToken, refreshed.accessToken)
        let secondRefresh = try await silent(connection, account: account, forceRefresh: true)
        XCTAssertEqual(secondRefresh.source, "refresh")

        // A restart keeps it all (the cache is persisted encrypted).
        XCTAssertEqual(daemon.stop(), 0)
        try daemon.start()
        let afterRestart = try await silent(connection, account: "alice")
        XCTAssertEqual(afterRestart.source, "cache")
        XCTAssertFalse(daemon.log.contains(refreshed.accessToken), "an access token reached the log")
    }

    func testDeviceCodeFlow() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let raw = try RawClient(daemon.socket, receiveTimeout: 60)
        try raw.send(#"{"jsonrpc":"2.0","id":7,"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","scopes":["mail.read"],"flow":"deviceCode"}}"# + "\n")
        let notification = try raw.readMessage()
        XCTAssertEqual(notification["method"] as? String, "deviceCode", "\(notification)")
        let params = try XCTUnwrap(notification["params"] as? [String: Any])
        let userCode = try XCTUnwrap(params["userCode"] as? String)
        XCTAssertTrue((params["verificationUri"] as? String ?? "").hasPrefix(idp.http))
        XCTAssertTrue((params["message"] as? String ?? "").contains(userCode))
        XCTAssertGreaterThan(params["expiresIn"] as? Int ?? 0, 0)

        // Approve only once brokerd has polled and been told authorization_pending.
        for _ in 0..<100 where try idp.tokenRequests("urn:ietf:params:oauth:grant-type:device_code") == 0 { usleep(50_000) }
        try idp.control("/test/approve-device?user_code=\(userCode)&username=bob")
        let answer = try raw.readMessage()
        XCTAssertEqual(answer["id"] as? Int, 7)
        let result = try XCTUnwrap(answer["result"] as? [String: Any], "\(answer)")
        XCTAssertEqual(result["source"] as? String, "interactive")
        XCTAssertEqual((result["account"] as? [String: Any])?["username"] as? String, "bob")
        XCTAssertGreaterThanOrEqual(try idp.tokenRequests("urn:ietf:params:oauth:grant-type:device_code"), 2,
                                    "polled while pending, then got the tokens")
    }

    func testDeniedDeviceCodeIsUserCanceled() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let raw = try RawClient(daemon.socket, receiveTimeout: 60)
        try raw.send(#"{"jsonrpc":"2.0","id":1,"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","scopes":["mail.read"],"flow":"deviceCode"}}"# + "\n")
        let params = try XCTUnwrap(try raw.readMessage()["params"] as? [String: Any])
        try idp.control("/test/deny-device?user_code=\(params["userCode"] as! String)")
        let answer = try raw.readMessage()
        XCTAssertEqual((answer["error"] as? [String: Any])?["code"] as? Int, -50005, "\(answer)")
    }

    func testConcurrentSilentCallsOnAnExpiredTokenShareOneRefresh() async throws {
        // The signed-in access token lives 60 s: inside the 5-minute buffer, so it counts as expired at once.
        let idp = try TestIdP(environment: ["ACCESS_TOKEN_EXPIRE_SECONDS": "60"])
        let daemon = try startBroker(idp)
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        // The refreshed token lives an hour; the refresh answers slowly, so all callers arrive while it runs.
        try idp.control("/test/config?access_token_expire_seconds=3600")
        try idp.control("/test/reset-counters")
        try idp.control("/test/delay?ms=500&count=1")

        // 1,000 calls at once: 50 connections (under the connection cap) with 20 calls in flight on each.
        let connections = (0..<50).map { _ in BrokerConnection(socketPath: daemon.socket) }
        let results = try await withThrowingTaskGroup(of: TokenResult.self) { group in
            for index in 0..<1_000 {
                let connection = connections[index % connections.count]
                group.addTask {
                    try await connection.call(.acquireTokenSilently, AcquireTokenSilentlyParams(
                        clientId: "brokerd-test-app-a", scopes: ["mail.read"], account: AccountReference("alice")),
                        as: TokenResult.self)
                }
            }
            var all: [TokenResult] = []
            for try await result in group { all.append(result) }
            return all
        }
        XCTAssertEqual(results.count, 1_000)
        XCTAssertEqual(Set(results.map(\.accessToken)).count, 1, "every caller got the one refreshed token")
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 1, "1,000 concurrent callers, exactly one refresh")
        XCTAssertTrue(results.allSatisfy { $0.source == "refresh" || $0.source == "cache" })
        XCTAssertGreaterThan(results.filter { $0.source == "refresh" }.count, 1, "callers joined the one refresh in flight")
    }

    func testRevokedRefreshTokenIsInteractionRequiredAndShownInStatus() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let connection = BrokerConnection(socketPath: daemon.socket)
        XCTAssertEqual(try daemon.ctl(["login", "mail", "--config", daemon.configPath]).status, 0, daemon.log)
        try idp.control("/test/revoke-refresh-tokens?username=alice")

        let code = await rpcCode { _ = try await self.silent(connection, account: "alice", forceRefresh: true) }
        XCTAssertEqual(code, -50002)
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.signInRequired.count, 1)
        XCTAssertEqual(status.refreshTokens, 1, "invalid_grant keeps the refresh token (it may serve other scopes)")
        XCTAssertTrue(try daemon.ctl(["status"]).stdout.contains("need sign-in"))

        let token = try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--force-refresh"])
        XCTAssertEqual(token.status, 4, token.stderr)
        XCTAssertTrue(token.stderr.contains("brokerctl login"), token.stderr)
        XCTAssertEqual(token.stdout, "")

        // Signing in again clears the flag.
        XCTAssertEqual(try daemon.ctl(["login", "mail", "--config", daemon.configPath]).status, 0)
        XCTAssertEqual(try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout).signInRequired, [])
    }

    func testUnreachableIdPIsRetryableAndKeepsTheRefreshToken() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let connection = BrokerConnection(socketPath: daemon.socket)
        XCTAssertEqual(try daemon.ctl(["login", "mail", "--config", daemon.configPath]).status, 0, daemon.log)

        // Two 503s: the one retry brokerd allows itself also fails.
        try idp.control("/test/fail-next?status=503&count=2")
        do {
            _ = try await silent(connection, account: "alice", forceRefresh: true)
            XCTFail("a 503 must fail the refresh")
        } catch let BrokerClientError.rpc(error) {
            XCTAssertEqual(error.code, -50006)
            XCTAssertEqual(error.data?.objectValue?["retryable"], .bool(true), "\(error)")
        }
        XCTAssertEqual(try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout).signInRequired, [])
        // The refresh token is still there and still works.
        let recovered = try await silent(connection, account: "alice", forceRefresh: true)
        XCTAssertEqual(recovered.source, "refresh")
    }

    func testHTTPSAuthorityWithTheTestCA() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp, https: true)
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        XCTAssertEqual(try decode(TokenResult.self, login.stdout).authority, idp.https)
    }

    func testUntrustedCertificateIsAClearError() async throws {
        let idp = try TestIdP()
        // No ca_file: the system store does not know the test CA.
        let config = "default_authority = \"\(idp.https)\"\n"
        let daemon = try Daemon(config: config)
        try daemon.start()
        let result = try daemon.ctl(["login", "--client-id", client, "--scope", "mail.read"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains("cannot reach"), result.stderr)
    }

    func testCancelInteractiveFlowIsUserCanceled() async throws {
        let idp = try TestIdP()
        let daemon = try Daemon(config: idp.brokerConfig().replacingOccurrences(of: "open_browser = \"always\"",
                                                                               with: "open_browser = \"never\""))
        try daemon.start()
        let raw = try RawClient(daemon.socket, receiveTimeout: 30)
        try raw.send(#"{"jsonrpc":"2.0","id":1,"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","scopes":["mail.read"]}}"# + "\n")
        let notification = try raw.readMessage()
        XCTAssertEqual(notification["method"] as? String, "browserUrl")
        let params = try XCTUnwrap(notification["params"] as? [String: Any])
        let url = try XCTUnwrap(params["url"] as? String)
        for part in ["code_challenge_method=S256", "code_challenge=", "state=", "nonce=", "redirect_uri=http%3A%2F%2F127.0.0.1%3A"] {
            XCTAssertTrue(url.contains(part), "\(part) missing in \(url)")
        }
        // A second interactive request for the same app is refused while the first runs.
        let second = try RawClient(daemon.socket).call(#"{"jsonrpc":"2.0","id":2,"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","scopes":["mail.read"]}}"#)
        XCTAssertEqual((second["error"] as? [String: Any])?["code"] as? Int, -32602, "\(second)")

        let requestId = try XCTUnwrap(params["requestId"] as? String)
        let cancel = try RawClient(daemon.socket).call(#"{"jsonrpc":"2.0","id":3,"method":"cancelInteractiveFlow","params":{"requestId":"\#(requestId)"}}"#)
        XCTAssertEqual((cancel["result"] as? [String: Any])?["canceled"] as? Bool, true, "\(cancel)")
        let answer = try raw.readMessage()
        XCTAssertEqual((answer["error"] as? [String: Any])?["code"] as? Int, -50005, "\(answer)")
    }

    func testSilentWithoutAnyAccountIsInteractionRequired() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let code = await rpcCode {
            _ = try await self.silent(BrokerConnection(socketPath: daemon.socket), account: "nobody@example.test")
        }
        XCTAssertEqual(code, -50002)
        let token = try daemon.ctl(["token", "mail", "--config", daemon.configPath])
        XCTAssertEqual(token.status, 4, token.stderr)
    }
}
