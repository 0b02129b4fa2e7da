import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// `[hooks]`: commands brokerd runs on broker events, against the real daemon and the real test IdP. Each hook writes
/// its environment (`env -0`) to `$HOOK_OUT/<event>.env`; `HOOK_OUT` is in brokerd's environment, which hooks inherit.
final class HooksTests: XCTestCase {
    /// A hook that records its environment and says something on stdout and stderr.
    private static let recordingHook = #"env -0 > "$HOOK_OUT/$BROKERD_EVENT.tmp" && mv "$HOOK_OUT/$BROKERD_EVENT.tmp" "$HOOK_OUT/$BROKERD_EVENT.env"; echo "hook-out $BROKERD_EVENT for $BROKERD_USERNAME"; echo "hook-err $BROKERD_EVENT" >&2"#

    private func startBroker(_ idp: TestIdP, extra: String = "", hooks: String) throws -> (daemon: Daemon, out: String) {
        let daemon = try Daemon(config: idp.brokerConfig(extra: extra) + "\n" + hooks)
        let out = daemon.directory.path + "/hook-out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        daemon.environment = idp.browserEnvironment().merging(["HOOK_OUT": out]) { $1 }
        try daemon.start()
        return (daemon, out)
    }

    /// The environment a hook recorded for `event`, once it has.
    private func recorded(_ event: String, in out: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: String] {
        let path = "\(out)/\(event).env"
        waitFor("the \(event) hook", timeout: 60, file: file, line: line) { FileManager.default.fileExists(atPath: path) }
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        var variables: [String: String] = [:]
        for entry in data.split(separator: 0) {
            let text = String(decoding: entry, as: UTF8.self)
            guard let equals = text.firstIndex(of: "=") else { continue }
            variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        return variables
    }

    /// No token of `secrets` is anywhere in any environment a hook recorded.
    private func assertNoSecret(_ secrets: [String], in out: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertFalse(secrets.isEmpty, file: file, line: line)
        for name in try FileManager.default.contentsOfDirectory(atPath: out) {
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: "\(out)/\(name)")), as: UTF8.self)
            for secret in secrets where !secret.isEmpty {
                XCTAssertFalse(text.contains(secret), "a token reached the environment of a hook (\(name))", file: file, line: line)
            }
        }
    }

    func testRefreshAndRefusedRefreshRunTheirHooksWithTheirVariablesAndNoToken() async throws {
        let idp = try TestIdP()
        let hooks = """
            [hooks]
            token_refreshed = '\(Self.recordingHook)'
            sign_in_required = '\(Self.recordingHook); exit 3'
            sign_in_pending = '\(Self.recordingHook)'
            """
        let (daemon, out) = try startBroker(idp, hooks: hooks)
        let connection = BrokerConnection(socketPath: daemon.socket)
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let signedIn = try decode(TokenResult.self, login.stdout)
        let account = signedIn.account.homeAccountId
        var secrets = [signedIn.accessToken, signedIn.idToken ?? ""] + (try await refreshTokens(connection))
        // The browser sign-in waited for the user at its authorization URL.
        let onPending = try recorded("sign_in_pending", in: out)
        XCTAssertEqual(onPending["BROKERD_CLIENT_ID"], testClient)
        XCTAssertTrue(onPending["BROKERD_VERIFICATION_URI"]?.hasPrefix(idp.http) == true, "\(onPending)")
        XCTAssertNil(onPending["BROKERD_USER_CODE"], "a browser sign-in has no user code")

        let refreshed = try await silent(connection, account: account, forceRefresh: true)
        XCTAssertEqual(refreshed.source, "refresh")
        secrets += [refreshed.accessToken, refreshed.idToken ?? ""] + (try await refreshTokens(connection))
        let onRefresh = try recorded("token_refreshed", in: out)
        XCTAssertEqual(onRefresh["BROKERD_EVENT"], "token_refreshed")
        XCTAssertEqual(onRefresh["BROKERD_ACCOUNT"], account)
        XCTAssertEqual(onRefresh["BROKERD_USERNAME"], "alice")
        XCTAssertEqual(onRefresh["BROKERD_CLIENT_ID"], testClient)
        XCTAssertTrue(onRefresh["BROKERD_AUTHORITY"]?.hasPrefix(idp.http) == true, "\(onRefresh)")
        XCTAssertEqual(onRefresh["HOOK_OUT"], out, "the rest of the environment is brokerd's")
        XCTAssertNil(onRefresh["BROKERD_USER_CODE"])
        waitFor("the hook's output in brokerd's log") {
            daemon.log.contains("hook token_refreshed stdout: hook-out token_refreshed for alice")
                && daemon.log.contains("hook token_refreshed stderr: hook-err token_refreshed")
        }

        try idp.control("/test/revoke-refresh-tokens?username=alice")
        let code = await rpcCode { _ = try await self.silent(connection, account: account, forceRefresh: true) }
        XCTAssertEqual(code, -50002)
        let onRefusal = try recorded("sign_in_required", in: out)
        XCTAssertEqual(onRefusal["BROKERD_EVENT"], "sign_in_required")
        XCTAssertEqual(onRefusal["BROKERD_ACCOUNT"], account)
        XCTAssertEqual(onRefusal["BROKERD_USERNAME"], "alice")
        XCTAssertEqual(onRefusal["BROKERD_CLIENT_ID"], testClient)
        waitFor("the failing hook logged") { daemon.log.contains("hook sign_in_required failed with exit status 3") }
        XCTAssertTrue(daemon.log.contains("hook sign_in_required stderr: hook-err sign_in_required"), daemon.log)

        try assertNoSecret(secrets, in: out)
        for secret in secrets where !secret.isEmpty { XCTAssertFalse(daemon.log.contains(secret), "a token reached the log") }
    }

    func testHangingHookIsKilledWithItsProcessGroupAtItsTimeoutWhileTheBrokerAnswers() async throws {
        let idp = try TestIdP()
        // The shell starts a child (same process group), records its pid and waits for it: both must go at the timeout.
        let hooks = """
            [hooks]
            timeout = 2
            token_refreshed = 'sleep 600 & echo $! > "$HOOK_OUT/sleep-$$.tmp"; mv "$HOOK_OUT/sleep-$$.tmp" "$HOOK_OUT/sleep-$$.pid"; echo hanging; wait'
            """
        let (daemon, out) = try startBroker(idp, hooks: hooks)
        let connection = BrokerConnection(socketPath: daemon.socket)
        XCTAssertEqual(try daemon.ctl(["login", "mail", "--config", daemon.configPath]).status, 0, daemon.log)
        _ = try await silent(connection, account: "alice", forceRefresh: true)
        try waitFor("the hanging hook to start its child") { try Self.files(in: out, ending: ".pid").count == 1 }

        // While it hangs, the broker answers: from the cache, with a refresh (a second hook starts), and its status.
        let cached = try await silent(connection, account: "alice")
        XCTAssertEqual(cached.source, "cache")
        let refreshedAgain = try await silent(connection, account: "alice", forceRefresh: true)
        XCTAssertEqual(refreshedAgain.source, "refresh")
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0)

        let killed = "hook token_refreshed still ran after its timeout of 2 s: its process group was killed"
        waitFor("both hooks killed at their timeout", timeout: 60) { daemon.log.components(separatedBy: killed).count == 3 }
        let sleepers = try Self.files(in: out, ending: ".pid").map {
            try XCTUnwrap(Int32(try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        XCTAssertEqual(sleepers.count, 2)
        waitFor("the hooks' children gone with their groups") { !sleepers.contains(where: Self.isRunning) }
        XCTAssertTrue(daemon.log.contains("hook token_refreshed stdout: hanging"), daemon.log)
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0)
    }

    func testEventsPastTheRunningAndWaitingHooksAreDroppedAndLogged() async throws {
        let idp = try TestIdP()
        // Each hook holds its slot (its shell's pid is its process group, recorded to end it after the test).
        let hooks = """
            [hooks]
            timeout = 300
            token_refreshed = 'echo $$ > "$HOOK_OUT/held-$$"; sleep 240'
            """
        let (daemon, out) = try startBroker(idp, hooks: hooks)
        let connection = BrokerConnection(socketPath: daemon.socket)
        XCTAssertEqual(try daemon.ctl(["login", "mail", "--config", daemon.configPath]).status, 0, daemon.log)
        // 4 run, 16 wait, the 21st event is dropped.
        for _ in 0..<21 { _ = try await silent(connection, account: "alice", forceRefresh: true) }
        waitFor("the dropped event logged") { daemon.log.contains("this event is dropped") }
        try waitFor("four hooks running") { try Self.files(in: out, ending: "").count == 4 }
        XCTAssertEqual(try Self.files(in: out, ending: "").count, 4, "no more than four hooks run at once")
        XCTAssertEqual(daemon.log.components(separatedBy: "this event is dropped").count, 2, "only the 21st is dropped")
        let meanwhile = try await silent(connection, account: "alice")
        XCTAssertEqual(meanwhile.source, "cache", "the broker answers meanwhile")

        XCTAssertEqual(daemon.stop(), 0)
        for file in try Self.files(in: out, ending: "") {
            if let group = Int32(try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) {
                kill(-group, SIGKILL)
            }
        }
    }

    func testFailedBackgroundRefreshRunsTheRefreshFailedHook() throws {
        // 400 s tokens: due for renewal at once (renew_ahead 600 s), and every renewal fails for a while.
        let idp = try TestIdP(environment: ["ACCESS_TOKEN_EXPIRE_SECONDS": "400"])
        let (daemon, out) = try startBroker(idp, extra: "refresh_check_interval = 0.2",
                                            hooks: "[hooks]\nrefresh_failed = '\(Self.recordingHook)'\n")
        try idp.control("/test/fail-next?status=503&count=6&grant_type=refresh_token")
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let signedIn = try decode(TokenResult.self, login.stdout)

        let failed = try recorded("refresh_failed", in: out)
        XCTAssertEqual(failed["BROKERD_EVENT"], "refresh_failed")
        XCTAssertEqual(failed["BROKERD_ACCOUNT"], signedIn.account.homeAccountId)
        XCTAssertEqual(failed["BROKERD_USERNAME"], "alice")
        XCTAssertEqual(failed["BROKERD_CLIENT_ID"], testClient)
        XCTAssertTrue(failed["BROKERD_AUTHORITY"]?.hasPrefix(idp.http) == true, "\(failed)")
        XCTAssertFalse(failed["BROKERD_REASON"]?.isEmpty ?? true, "\(failed)")
        XCTAssertGreaterThan(Int(failed["BROKERD_RETRY_IN"] ?? "") ?? 0, 0, "\(failed)")
        try assertNoSecret([signedIn.accessToken, signedIn.idToken ?? ""], in: out)
    }

    private static func files(in directory: String, ending suffix: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(suffix) && !$0.hasSuffix(".tmp") }
            .sorted().map { "\(directory)/\($0)" }
    }

    func testDeviceCodeSignInRunsTheSignInPendingHookAddedByAReload() async throws {
        let idp = try TestIdP()
        let (daemon, out) = try startBroker(idp, hooks: "")
        // Reload with a [hooks] table: it applies to the events from then on.
        try (idp.brokerConfig() + "\n[hooks]\nsign_in_pending = '\(Self.recordingHook)'\n")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)
        waitFor("the reload") { daemon.log.contains("hooks configured events=sign_in_pending timeout_s=10") }

        let raw = try RawClient(daemon.socket, receiveTimeout: 60)
        try raw.send(#"{"jsonrpc":"2.0","id":7,"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","scopes":["mail.read"],"flow":"deviceCode","loginHint":"bob"}}"# + "\n")
        let prompt = try XCTUnwrap(try raw.readMessage()["params"] as? [String: Any])
        let userCode = try XCTUnwrap(prompt["userCode"] as? String)
        let pending = try recorded("sign_in_pending", in: out)
        XCTAssertEqual(pending["BROKERD_EVENT"], "sign_in_pending")
        XCTAssertEqual(pending["BROKERD_USER_CODE"], userCode)
        XCTAssertEqual(pending["BROKERD_VERIFICATION_URI"], prompt["verificationUri"] as? String)
        XCTAssertEqual(pending["BROKERD_CLIENT_ID"], testClient)
        XCTAssertEqual(pending["BROKERD_USERNAME"], "bob", "the login hint: the account is not known yet")
        XCTAssertNil(pending["BROKERD_ACCOUNT"])

        for _ in 0..<200 where try idp.tokenRequests("urn:ietf:params:oauth:grant-type:device_code") == 0 { usleep(50_000) }
        try idp.control("/test/approve-device?user_code=\(userCode)&username=bob")
        let answer = try XCTUnwrap(try raw.readMessage()["result"] as? [String: Any])
        let connection = BrokerConnection(socketPath: daemon.socket)
        let secrets = [answer["accessToken"] as? String ?? "", answer["idToken"] as? String ?? ""] + (try await refreshTokens(connection))
        try assertNoSecret(secrets, in: out)
        waitFor("the hook's output in brokerd's log") { daemon.log.contains("hook sign_in_pending stdout: hook-out sign_in_pending for bob") }
    }

    /// Alive and not a zombie (a zombie waits for a reaper that may be slow in a container).
    private static func isRunning(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        guard let close = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }
}
