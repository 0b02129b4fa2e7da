import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// More token scenarios of the token-engine issue, through the real brokerd and the real test IdP.
final class TokenScenarioTests: XCTestCase {
    func testTheTestPlaysTheBrowserAndASecondConnectionGetsTheTokenSilently() async throws {
        let idp = try TestIdP()
        let daemon = try Daemon(config: idp.brokerConfig().replacingOccurrences(of: "open_browser = \"always\"",
                                                                               with: "open_browser = \"never\""))
        try daemon.start()
        let app1 = try RawClient(daemon.socket, receiveTimeout: 30)
        try app1.send(#"{"jsonrpc":"2.0","id":1,"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","scopes":["mail.read"],"loginHint":"alice"}}"# + "\n")
        let notification = try app1.readMessage()
        XCTAssertEqual(notification["method"] as? String, "browserUrl")
        let url = try XCTUnwrap((notification["params"] as? [String: Any])?["url"] as? String)
        XCTAssertTrue(url.contains("login_hint=alice"), url)
        // The test is the browser: it opens the URL and signs in on the IdP's form.
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in idp.browserEnvironment() where key != "BROWSER" { environment[key] = value }
        let browser = try runCommand("/usr/bin/python3", [TestIdP.fakeBrowser, url], environment: environment)
        XCTAssertEqual(browser.status, 0, browser.stderr)
        let answer = try app1.readMessage()
        let result = try XCTUnwrap(answer["result"] as? [String: Any], "\(answer)")
        XCTAssertEqual(result["source"] as? String, "interactive")

        // Another app process of the same registration: silent, from the cache, no sign-in.
        let app2 = BrokerConnection(socketPath: daemon.socket)
        let silent = try await app2.call(.acquireTokenSilently, AcquireTokenSilentlyParams(
            clientId: "brokerd-test-app-a", scopes: ["mail.read"], account: AccountReference("alice")), as: TokenResult.self)
        XCTAssertEqual(silent.source, "cache")
        XCTAssertEqual(silent.accessToken, result["accessToken"] as? String)
    }

    func testDeviceCodeExpiryIsAClearError() throws {
        let idp = try TestIdP(environment: ["DEVICE_CODE_EXPIRE_SECONDS": "2"])
        let daemon = try startBroker(idp)
        let raw = try RawClient(daemon.socket, receiveTimeout: 30)
        try raw.send(#"{"jsonrpc":"2.0","id":1,"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","scopes":["mail.read"],"flow":"deviceCode"}}"# + "\n")
        XCTAssertEqual(try raw.readMessage()["method"] as? String, "deviceCode")
        let answer = try raw.readMessage()
        let error = try XCTUnwrap(answer["error"] as? [String: Any], "\(answer)")
        XCTAssertEqual(error["code"] as? Int, -50005)
        XCTAssertTrue((error["message"] as? String ?? "").contains("expired"), "\(error)")
    }

    func testOldRefreshTokenIsRejectedAfterRotationAndTheBrokerStillWorks() async throws {
        // Without reuse protection, so that presenting the old token does not revoke the new one.
        let idp = try TestIdP(environment: ["ACCESS_TOKEN_EXPIRE_SECONDS": "60", "REFRESH_TOKEN_REUSE_PROTECTION": "0"])
        let daemon = try startBroker(idp)
        let connection = BrokerConnection(socketPath: daemon.socket)
        XCTAssertEqual(try daemon.ctl(["login", "mail", "--config", daemon.configPath]).status, 0, daemon.log)
        let before = try await refreshTokens(connection)

        // The 60-second token counts as expired: silent refreshes, and the refresh token rotates.
        let refreshed = try await silent(connection, account: "alice")
        XCTAssertEqual(refreshed.source, "refresh")
        let after = try await refreshTokens(connection)
        XCTAssertNotEqual(before, after)

        let replay = try idp.tokenEndpoint(["grant_type": "refresh_token", "client_id": "brokerd-test-app-a",
                                            "refresh_token": before[0]])
        XCTAssertEqual(replay["error"] as? String, "invalid_grant", "the used refresh token is dead: \(replay.keys)")
        let again = try await silent(connection, account: "alice")
        XCTAssertEqual(again.source, "refresh", "the broker holds the rotated token and keeps working")
    }

    func testDeclinedScopeIsReportedAndTheGrantedTokenIsCached() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let connection = BrokerConnection(socketPath: daemon.socket)
        // Signed in with both scopes; the next refresh asks for both and the IdP grants only mail.read.
        let login = try daemon.ctl(["login", "--client-id", testClient, "--scope", "mail.read", "--scope", "files.read"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        try idp.control("/test/decline-scope?scope=files.read")
        do {
            _ = try await silent(connection, account: "alice", scopes: ["mail.read", "files.read"], forceRefresh: true)
            XCTFail("files.read was declined")
        } catch let BrokerClientError.rpc(error) {
            XCTAssertEqual(error.code, -50003)
            XCTAssertEqual(error.data?.objectValue?["declinedScopes"], .array([.string("files.read")]), "\(error)")
            XCTAssertTrue(error.data?.objectValue?["grantedScopes"]?.arrayValue?.contains(.string("mail.read")) == true)
        }
        try idp.control("/test/reset-counters")
        let granted = try await silent(connection, account: "alice", scopes: ["mail.read"])
        XCTAssertEqual(granted.source, "cache", "the tokens of the granted scopes were cached")
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 0)
    }

    func testIdPDownServesTheCachedTokenThenARetryableError() async throws {
        let idp = try TestIdP()
        // A refused connection fails at once: were it retried until connect_timeout, the forced refresh would
        // outlast the client's 30 s wait.
        let daemon = try startBroker(idp, extra: "connect_timeout = 60")
        let connection = BrokerConnection(socketPath: daemon.socket, timeoutSeconds: 30)
        XCTAssertEqual(try daemon.ctl(["login", "mail", "--config", daemon.configPath]).status, 0, daemon.log)
        idp.stop()

        let cached = try await silent(connection, account: "alice")
        XCTAssertEqual(cached.source, "cache", "a valid cached token needs no IdP")
        do {
            _ = try await silent(connection, account: "alice", forceRefresh: true)
            XCTFail("the IdP is down")
        } catch let BrokerClientError.rpc(error) {
            XCTAssertEqual(error.code, -50006)
            XCTAssertEqual(error.data?.objectValue?["retryable"], .bool(true))
        }
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.refreshTokens, 1, "an unreachable IdP never costs a refresh token")
        XCTAssertEqual(status.signInRequired, [])
    }

    /// `brokerctl login --device-code` as a person on a headless machine uses it, then `brokerctl token` in a script.
    func testBrokerctlDeviceCodeLoginAndTokenForScripts() throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let login = Process()
        login.executableURL = URL(fileURLWithPath: Binaries.brokerctl)
        login.arguments = ["login", "mail", "--device-code", "--config", daemon.configPath, "--socket", daemon.socket]
        let stderr = Pipe(), stdout = Pipe()
        login.standardError = stderr
        login.standardOutput = stdout
        try login.run()

        // The user reads the code brokerctl shows and enters it at the IdP (here: the IdP's test approval).
        var shown = ""
        let deadline = Date().addingTimeInterval(20)
        while !shown.contains("enter the code"), Date() < deadline {
            shown += String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
        }
        let words = shown.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "." })
        let code = try XCTUnwrap(words.last.map(String.init), shown)
        try idp.control("/test/approve-device?user_code=\(code)&username=alice")
        login.waitUntilExit()
        XCTAssertEqual(login.terminationStatus, 0, shown)
        let printed = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(printed.hasPrefix("Signed in as alice"), printed)

        let token = try daemon.ctl(["token", "mail", "--config", daemon.configPath])
        XCTAssertEqual(token.status, 0, token.stderr)
        XCTAssertEqual(token.stdout.split(separator: "\n").count, 1, "only the token, on one line")
        XCTAssertFalse(token.stdout.contains(" "))
        let json = try decode(TokenResult.self, try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--json"]).stdout)
        XCTAssertEqual(json.accessToken + "\n", token.stdout)
    }
}

/// refresh_on (from the IdP's refresh_in): an aging token is renewed, and still served while the IdP is down.
final class AgingTokenTests: XCTestCase {
    func testAgingTokenIsRenewedAndServedWhenTheIdPIsDown() async throws {
        let idp = try TestIdP(environment: ["REFRESH_IN_SECONDS": "1"])
        let daemon = try startBroker(idp, extra: "")
        let connection = BrokerConnection(socketPath: daemon.socket)
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let signedIn = try decode(TokenResult.self, login.stdout)
        let refreshOn = try XCTUnwrap(signedIn.refreshOn)
        XCTAssertLessThanOrEqual(refreshOn, Int64(Date().timeIntervalSince1970) + 2)
        waitFor("the wall clock past refresh_on") { Int64(Date().timeIntervalSince1970) > refreshOn }

        // Past refresh_on: silent renews although the token has an hour left.
        let renewed = try await silent(connection, account: "alice")
        XCTAssertEqual(renewed.source, "refresh")
        let renewedRefreshOn = try XCTUnwrap(renewed.refreshOn)
        waitFor("the wall clock past the renewed token's refresh_on") { Int64(Date().timeIntervalSince1970) > renewedRefreshOn }
        // Past refresh_on again, and the IdP is down: the still-valid aging token is served.
        idp.stop()
        let aging = try await silent(connection, account: "alice")
        XCTAssertEqual(aging.source, "cache")
        XCTAssertEqual(aging.accessToken, renewed.accessToken)
    }
}

/// Timestamps in an imported cache can be anything; no value may crash the daemon.
final class AbsurdTimestampTests: XCTestCase {
    func testExtremeTimestampsInAnImportedCacheAreSurvived() async throws {
        let daemon = try Daemon(config: "default_authority = \"http://127.0.0.1:9/tenant\"\nallow_loopback_http = true\n")
        try daemon.start()
        let hid = "fake-uid.fake-utid"
        func token(_ secret: String, expires: String, refreshOn: String) -> String {
            #"{"credential_type":"AccessToken","secret":"\#(secret)","home_account_id":"\#(hid)","environment":"127.0.0.1:9","client_id":"app","realm":"tenant","target":"s1 s2","cached_at":"\#(expires)","expires_on":"\#(expires)","extended_expires_on":"\#(expires)","refresh_on":"\#(refreshOn)"}"#
        }
        let document = """
        {"AccessToken":{"a":\(token("fake-at-min", expires: "-9223372036854775808", refreshOn: "-9223372036854775808")),
                        "b":\(token("fake-at-max", expires: "9223372036854775807", refreshOn: "9223372036854775807")),
                        "c":\(token("fake-at-float", expires: "1e300", refreshOn: "-1e300"))},
         "RefreshToken":{"r":{"credential_type":"RefreshToken","secret":"fake-rt","home_account_id":"\(hid)","environment":"127.0.0.1:9","client_id":"app","last_modification_time":"-9223372036854775808"}},
         "Account":{"x":{"home_account_id":"\(hid)","environment":"127.0.0.1:9","realm":"tenant","username":"u@example.test","authority_type":"MSSTS"}}}
        """
        let imported = try daemon.ctl(["import", "-"], stdin: document)
        XCTAssertEqual(imported.status, 0, imported.stderr + daemon.log)
        for scope in ["s1", "s3"] {
            _ = try? await BrokerConnection(socketPath: daemon.socket).call(.acquireTokenSilently, AcquireTokenSilentlyParams(
                clientId: "app", scopes: [scope], account: AccountReference(hid)), as: TokenResult.self)
        }
        XCTAssertEqual(try daemon.ctl(["accounts"]).status, 0)
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0, "brokerd still serves: \(daemon.log)")
        XCTAssertEqual(daemon.stop(), 0)
    }
}
