import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// The background refresh and `subscribe`, against the real daemon and the real test IdP.
final class BackgroundRefreshTests: XCTestCase {
    func testUsedTokenIsRenewedBeforeItExpiresAndOnlyOnce() throws {
        // The sign-in's token lives 400 s: outside the 5-minute buffer (served from the cache) but inside renew_ahead
        // (600 s). Every later token lives an hour: once renewed, nothing is due any more.
        let idp = try TestIdP(environment: ["FIRST_ACCESS_TOKEN_EXPIRE_SECONDS": "400"])
        let daemon = try Daemon(config: "refresh_check_interval = 0.2\n\(idp.brokerConfig())")
        daemon.environment = idp.browserEnvironment()
        try daemon.start()
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let signedIn = try decode(TokenResult.self, login.stdout)

        try waitFor("the background refresh") { try idp.tokenRequests("refresh_token") >= 1 }
        let token = try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--json"])
        let renewed = try decode(TokenResult.self, token.stdout)
        XCTAssertEqual(renewed.source, "cache", "the app gets the renewed token from the cache, without waiting")
        XCTAssertNotEqual(renewed.accessToken, signedIn.accessToken)
        XCTAssertGreaterThan(renewed.expiresOn, signedIn.expiresOn + 3000)
        waitForRefreshChecks(daemon, count: 3)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 1, "a renewed token is not renewed again")
    }

    func testFailuresBackOffWithoutLosingTheRefreshToken() throws {
        let idp = try TestIdP(environment: ["ACCESS_TOKEN_EXPIRE_SECONDS": "400"])
        let daemon = try Daemon(config: "refresh_check_interval = 0.2\n\(idp.brokerConfig())")
        daemon.environment = idp.browserEnvironment()
        // Every refresh attempt fails for a while: brokerd's one retry and the next pass's, if it came too soon. Set
        // before the sign-in, so that no check between the sign-in and this line can renew the token first.
        try idp.control("/test/fail-next?status=503&count=6&grant_type=refresh_token")
        try daemon.start()
        XCTAssertEqual(try daemon.ctl(["login", "mail", "--config", daemon.configPath]).status, 0, daemon.log)
        try waitFor("a failed background refresh") { try idp.tokenRequests("refresh_token") >= 2 }
        waitForRefreshChecks(daemon, count: 4)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 2, "after a failure the next try waits (backoff ≥ 30 s)")
        XCTAssertTrue(daemon.log.contains("background refresh failed; backing off"), daemon.log)
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.refreshTokens, 1)
        XCTAssertEqual(status.signInRequired, [])
    }

    func testSubscribersGetAccountEvents() throws {
        let idp = try TestIdP()
        let daemon = try Daemon(config: idp.brokerConfig())
        daemon.environment = idp.browserEnvironment()
        try daemon.start()
        let subscriber = try RawClient(daemon.socket, receiveTimeout: 20)
        let subscribed = try subscriber.call(#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{}}"#)
        XCTAssertEqual((subscribed["result"] as? [String: Any])?["events"] as? [String],
                       ["accountAdded", "accountRemoved", "signInRequired", "statusChanged", "signInPending", "signInEnded",
                        "consentPending", "consentEnded"],
                       "\(subscribed)")

        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        let hid = try decode(TokenResult.self, login.stdout).account.homeAccountId
        let added = try subscriber.readMessage()
        XCTAssertEqual(added["method"] as? String, "accountAdded")
        XCTAssertEqual((added["params"] as? [String: Any])?["homeAccountId"] as? String, hid)

        try idp.control("/test/revoke-refresh-tokens?username=alice")
        XCTAssertEqual(try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--force-refresh"]).status, 4)
        let needsSignIn = try subscriber.readMessage()
        XCTAssertEqual(needsSignIn["method"] as? String, "signInRequired")
        XCTAssertEqual((needsSignIn["params"] as? [String: Any])?["clientId"] as? String, "brokerd-test-app-a")

        XCTAssertEqual(try daemon.ctl(["signout", hid]).status, 0)
        let removed = try subscriber.readMessage()
        XCTAssertEqual(removed["method"] as? String, "accountRemoved")

        let bad = try RawClient(daemon.socket).call(#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"events":["bogus"]}}"#)
        XCTAssertEqual((bad["error"] as? [String: Any])?["code"] as? Int, -32602)
    }
}
