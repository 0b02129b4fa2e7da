import Foundation
import XCTest

/// The real brokerd against a hostile identity provider of ours (Tests/idp/hostile_idp.py): absurd numbers,
/// bodies that are not JSON, too big, never ending, dripped or never sent, redirect loops, JSON nested 100,000
/// deep, token responses missing each field, id_tokens with a wrong iss / aud / nonce / exp. Every caller gets a
/// JSON-RPC answer of the documented shape, brokerd stays up, another app's cache hit is answered meanwhile, and no
/// token, code or secret the IdP handed out reaches an error message or the log.
final class HostileIdPTests: XCTestCase {
    /// What an answer must be: an error with this code (and `data.reason`, when given) or a token.
    enum Expected {
        case error(Int, reason: String?)
        case token
    }

    func testMalformedAnswersGetClearErrors() throws {
        let idp = try HostileIdP()
        let daemon = try Daemon(config: idp.brokerConfig(requestTimeout: 30))
        try daemon.start()
        let discoveryFailed = Expected.error(-32602, reason: "discoveryFailed"), serverError = Expected.error(-50006, reason: nil)
        var cases: [(String, Expected)] = [
            ("discovery-notjson", discoveryFailed), ("discovery-bigbody", discoveryFailed),
            ("discovery-endless", discoveryFailed), ("discovery-deep", discoveryFailed),
            ("discovery-redirect", discoveryFailed), ("discovery-headbomb", .error(-50006, reason: "unavailable")),
        ]
        for endpoint in ["device", "token"] {
            cases += ["notjson", "bigbody", "endless", "deep", "redirect"].map { ("\(endpoint)-\($0)", serverError) }
        }
        cases += [("idtoken-iss", serverError), ("idtoken-aud", serverError), ("idtoken-exp", serverError)]
        cases += [("token-missing-access_token", serverError), ("token-missing-id_token", serverError)]
        cases += ["token_type", "expires_in", "refresh_token", "scope"].map { ("token-missing-\($0)", .token) }
        cases += [("token-huge", .token), ("token-negative", .token), ("idtoken-bignumber", .token)]

        // All at once, each on its own connection: one IdP's trouble is no other request's.
        let flows = try cases.map { try HostileFlow($0.0, idp: idp, daemon: daemon) }
        var answers: [String: [String: Any]] = [:]
        for (flow, (name, expected)) in zip(flows, cases) {
            let answer = try flow.answer()
            answers[name] = answer
            check(answer, expected, name)
        }

        // Lifetimes are clamped: ten years at most, and a negative one is already expired.
        let now = Int64(Date().timeIntervalSince1970)
        func expiry(_ name: String) throws -> Int64 { Int64(try XCTUnwrap(answers[name]?.result?["expiresOn"] as? Int, name)) }
        let hugeExpiry = try expiry("token-huge")
        XCTAssertGreaterThan(hugeExpiry, now + 9 * 365 * 86_400)
        XCTAssertLessThanOrEqual(hugeExpiry, now + 10 * 365 * 86_400 + 86_400)
        XCTAssertNil(answers["token-huge"]?.result?["refreshOn"], "a refresh_in beyond Int64 counts as absent")
        XCTAssertLessThanOrEqual(try expiry("token-negative"), now, "a negative expires_in is an expired token")
        XCTAssertGreaterThan(try expiry("token-missing-expires_in"), now + 3000, "no expires_in is an hour")

        // What the messages say, for the cases a user would have to understand.
        XCTAssertTrue(message(answers["discovery-bigbody"]).contains("larger than 4 MiB"), message(answers["discovery-bigbody"]))
        XCTAssertTrue(message(answers["token-endless"]).contains("larger than 4 MiB"), message(answers["token-endless"]))
        XCTAssertTrue(message(answers["discovery-redirect"]).contains("HTTP 302"), message(answers["discovery-redirect"]))
        XCTAssertTrue(message(answers["token-deep"]).contains("not a JSON object"), message(answers["token-deep"]))
        XCTAssertTrue(message(answers["idtoken-iss"]).contains("issuer"), message(answers["idtoken-iss"]))
        XCTAssertTrue(message(answers["idtoken-aud"]).contains("audience"), message(answers["idtoken-aud"]))
        XCTAssertTrue(message(answers["token-missing-access_token"]).contains("no access_token"))

        // The big bodies were cut off: brokerd read its 4 MiB of the endless one, then closed, long before 64 MiB.
        XCTAssertLessThan(try idp.bodyBytesSent("discovery-bigbody"), 64 << 20)
        XCTAssertGreaterThanOrEqual(try idp.bodyBytesSent("token-endless"), 4 << 20)
        XCTAssertLessThan(try idp.bodyBytesSent("token-endless"), 64 << 20)
        // NIO's HTTP parser takes 80 KiB of headers at most.
        XCTAssertLessThan(try idp.bodyBytesSent("discovery-headbomb"), 64 << 20)
        // A header bomb is the endpoint's failure, not the network's: the host is not backed off for it, which would
        // fail every other case of this run on the same host with its message.
        XCTAssertTrue(message(answers["discovery-headbomb"]).contains("not valid HTTP"), message(answers["discovery-headbomb"]))
        XCTAssertFalse(Array(answers.values).contains { message($0).contains("cannot reach") },
                       "no case was refused for another's failure: \(answers.filter { message($0.value).contains("cannot reach") }.keys)")
        // Claims beyond any Double are kept as accountClaims: every account answer must still encode.
        let accounts = try RawClient(daemon.socket).request("getAccounts")
        XCTAssertNotNil(accounts.result?["accounts"], "\(accounts)")
        try assertStillServing(daemon, idp: idp, answers: Array(answers.values))
    }

    func testAbsurdDeviceCodeNumbersAreClamped() throws {
        let idp = try HostileIdP()
        let daemon = try Daemon(config: idp.brokerConfig(requestTimeout: 30))
        try daemon.start()
        // interval 2^63-1 and expires_in 10^18: the notification shows a day, and the flow waits to be canceled.
        let huge = try HostileFlow("device-huge", idp: idp, daemon: daemon)
        let note = try XCTUnwrap(huge.nextNotification()["params"] as? [String: Any])
        XCTAssertEqual(note["expiresIn"] as? Int, 86_400)
        let requestId = try XCTUnwrap(note["requestId"] as? String)
        let canceler = try RawClient(daemon.socket)
        XCTAssertEqual(try canceler.request("cancelInteractiveFlow", ["requestId": requestId]).result?["canceled"] as? Bool, true)
        let hugeAnswer = try huge.answer()
        check(hugeAnswer, .error(-50005, reason: nil), "device-huge")

        // expires_in -2^63 and interval -1: one second, one second: the code has expired at the first poll.
        let negative = try HostileFlow("device-negative", idp: idp, daemon: daemon)
        XCTAssertEqual((try negative.nextNotification()["params"] as? [String: Any])?["expiresIn"] as? Int, 1)
        let negativeAnswer = try negative.answer()
        check(negativeAnswer, .error(-50005, reason: nil), "device-negative")
        XCTAssertTrue(message(negativeAnswer).contains("expired"), message(negativeAnswer))
        try assertStillServing(daemon, idp: idp, answers: [hugeAnswer, negativeAnswer])
    }

    func testWrongNonceIsRefused() throws {
        let idp = try HostileIdP()
        let daemon = try Daemon(config: idp.brokerConfig(requestTimeout: 30))
        // The "browser" follows the authorization endpoint's redirect to brokerd's loopback listener, as a browser
        // with a signed-in session would.
        let browser = daemon.directory.path + "/browser.sh"
        try "#!/bin/sh\nexec /usr/bin/curl -s -o /dev/null -L --max-redirs 2 --max-time 60 \"$1\"\n"
            .write(toFile: browser, atomically: true, encoding: .utf8)
        chmod(browser, 0o755)
        daemon.environment = ["BROWSER": browser]
        try daemon.start()

        let good = try HostileFlow("normal", idp: idp, daemon: daemon, flow: "browser")
        let goodAnswer = try good.answer()
        check(goodAnswer, .token, "normal (browser)")
        let wrong = try HostileFlow("idtoken-nonce", idp: idp, daemon: daemon, flow: "browser")
        let wrongAnswer = try wrong.answer()
        check(wrongAnswer, .error(-50006, reason: nil), "idtoken-nonce")
        XCTAssertTrue(message(wrongAnswer).contains("nonce"), message(wrongAnswer))
        try assertStillServing(daemon, idp: idp, answers: [wrongAnswer])
    }

    func testSlowServersEndAtTheRequestTimeoutWhileCacheHitsAreAnswered() throws {
        let idp = try HostileIdP()
        let daemon = try Daemon(config: idp.brokerConfig(requestTimeout: 3))
        try daemon.start()
        let bystander = try signInBystander(idp, daemon)

        // Bodies and heads dripped a byte a second, and requests never answered, at each endpoint. AsyncHTTPClient
        // keeps 8 connections per host: these 7 fit, so none of them waits behind another.
        let cases = ["discovery-drip", "discovery-driphead", "discovery-hang", "device-drip", "device-hang",
                     "token-drip", "token-hang"]
        let flows = try cases.map { try HostileFlow($0, idp: idp, daemon: daemon) }
        // Once the drips have begun (a state that lasts; that the hits come while a request is held is shown, without
        // a clock, by testHungServerHoldsOnlyItsOwnCaller).
        waitUntil("the drips have begun") { cases.allSatisfy { ((try? idp.requests($0)) ?? 0) > 0 } }
        XCTAssertEqual(try bystander.silent()["source"] as? String, "cache")

        var answers: [[String: Any]] = []
        for flow in flows {
            let answer = try flow.answer()
            answers.append(answer)
            XCTAssertEqual(try bystander.silent()["source"] as? String, "cache")
            // A request that never got through ends as a network failure: for the device flows too, which poll on
            // until the code expires and then say why no answer came (the token endpoint), not "expired".
            let expected: Expected = .error(-50006, reason: "unavailable")
            check(answer, expected, flow.hostileCase)
        }
        try assertStillServing(daemon, idp: idp, answers: answers)
    }

    func testHungServerHoldsOnlyItsOwnCaller() throws {
        let idp = try HostileIdP()
        let daemon = try Daemon(config: idp.brokerConfig(requestTimeout: 60))
        try daemon.start()
        let bystander = try signInBystander(idp, daemon)

        let hung = try HostileFlow("discovery-hang", idp: idp, daemon: daemon)
        waitUntil("the request is held") { (try? idp.inFlight("discovery-hang")) == 1 }
        // The server holds the request until released: these answers come while it is held, whatever the clock says.
        for _ in 0..<3 { XCTAssertEqual(try bystander.silent()["source"] as? String, "cache") }
        XCTAssertTrue(hung.isUnanswered(), "the hung request was answered before the server let go: \((try? hung.answer()) ?? [:])")
        try idp.release()
        let answer = try hung.answer()
        check(answer, .error(-50006, reason: "unavailable"), "discovery-hang")
        try assertStillServing(daemon, idp: idp, answers: [answer])
    }

    // MARK: Helpers

    /// An app with a cached token from the `normal` case: its silent calls are cache hits.
    private func signInBystander(_ idp: HostileIdP, _ daemon: Daemon) throws -> Bystander {
        let signIn = try HostileFlow("normal", idp: idp, daemon: daemon)
        let answer = try signIn.answer()
        check(answer, .token, "normal")
        let account = try XCTUnwrap((answer.result?["account"] as? [String: Any])?["homeAccountId"] as? String)
        return try Bystander(daemon: daemon, authority: idp.authority("normal"), account: account)
    }

    private struct Bystander {
        let client: RawClient
        let authority: String
        let account: String

        init(daemon: Daemon, authority: String, account: String) throws {
            client = try RawClient(daemon.socket, receiveTimeout: 60)
            self.authority = authority
            self.account = account
        }

        func silent() throws -> [String: Any] {
            let answer = try client.request("acquireTokenSilently", [
                "clientId": "hostile-normal", "authority": authority, "scopes": ["mail.read"],
                "account": ["homeAccountId": account],
            ])
            return answer.result ?? answer
        }
    }

    private func check(_ answer: [String: Any], _ expected: Expected, _ name: String, line: UInt = #line) {
        switch expected {
        case .token:
            XCTAssertEqual(answer.result?["source"] as? String, "interactive", "\(name): \(answer)", line: line)
        case .error(let code, let reason):
            XCTAssertEqual(answer.errorCode, code, "\(name): \(answer)", line: line)
            XCTAssertFalse((answer.errorMessage ?? "").isEmpty, "\(name): an error without a message", line: line)
            if let reason {
                let data = (answer["error"] as? [String: Any])?["data"] as? [String: Any]
                XCTAssertEqual(data?["reason"] as? String, reason, "\(name): \(answer)", line: line)
            }
        }
    }

    private func message(_ answer: [String: Any]?) -> String { answer?.errorMessage ?? "" }

    /// brokerd still answers, and no secret of the IdP's is in an error or the log.
    private func assertStillServing(_ daemon: Daemon, idp: HostileIdP, answers: [[String: Any]],
                                    file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(daemon.process?.isRunning, true, "brokerd exited: \(daemon.log)", file: file, line: line)
        let status = try RawClient(daemon.socket).request("getStatus")
        XCTAssertNotNil(status.result?["pid"], "\(status)", file: file, line: line)
        let errors = answers.compactMap { $0["error"] }.map { String(describing: $0) }.joined(separator: "\n")
        let log = daemon.log
        let secrets = try idp.secrets()
        XCTAssertFalse(secrets.isEmpty, file: file, line: line)
        for secret in secrets {
            XCTAssertFalse(errors.contains(secret), "a secret of the IdP's is in an error message", file: file, line: line)
            XCTAssertFalse(log.contains(secret), "a secret of the IdP's is in brokerd's log", file: file, line: line)
        }
    }

    /// Polls a condition of the fixture's state (never a duration assertion: it only waits for a state to be reached).
    private func waitUntil(_ what: String, _ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        var reached = condition()
        for _ in 0..<1_200 where !reached {
            usleep(50_000)
            reached = condition()
        }
        XCTAssertTrue(reached, "never reached: \(what)", file: file, line: line)
    }
}
