import BrokerProtocol
import Foundation
import XCTest

/// brokerd remembers the answer to a cache hit and gives it again to the same request (SilentAnswerMemo). These
/// tests hold it to the two things that make that safe: the answer is byte for byte what the full path would write
/// (with each request's own correlation id), and it goes the moment it stops being the answer. Tokens are compared
/// with XCTAssertTrue, so that a failure does not print them.
final class AnswerMemoTests: XCTestCase {
    private func signIn(_ daemon: Daemon) throws -> String {
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let object = try JSONSerialization.jsonObject(with: Data(login.stdout.utf8)) as? [String: Any]
        let account = object?["account"] as? [String: Any]
        return try XCTUnwrap(account?["homeAccountId"] as? String, login.stdout)
    }

    /// The request line, members always in the same order; `extra` is appended to params as it is.
    private func silentLine(_ hid: String, id: Int = 1, extra: String = "") -> String {
        #"{"jsonrpc":"2.0","id":\#(id),"method":"acquireTokenSilently","params":{"clientId":"\#(testClient)","scopes":["mail.read"],"account":{"homeAccountId":"\#(hid)"}\#(extra)}}"#
    }

    private func answerLine(_ raw: RawClient, _ line: String) throws -> String {
        try raw.send(line + "\n")
        return try XCTUnwrap(raw.readLine(), "no answer to \(line)")
    }

    private func result(_ line: String) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        return try XCTUnwrap(object?["result"] as? [String: Any], line)
    }

    func testARepeatedRequestGetsTheSameBytesWithItsOwnCorrelationId() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let hid = try signIn(daemon)
        try idp.control("/test/reset-counters")
        let raw = try RawClient(daemon.socket)

        let first = try answerLine(raw, silentLine(hid))
        XCTAssertEqual(try result(first)["source"] as? String, "cache")
        XCTAssertNil(try result(first)["correlationId"])
        let servedBefore = try XCTUnwrap(try RawClient(daemon.socket).request("getStatus").result?["requestsServed"] as? Int)
        for _ in 0..<3 {
            XCTAssertTrue(try answerLine(raw, silentLine(hid)) == first, "a repeated request, a different answer")
        }
        // Each connection remembers its own answers; another one gets the same bytes, and every answer is counted.
        let second = try RawClient(daemon.socket)
        for _ in 0..<2 { XCTAssertTrue(try answerLine(second, silentLine(hid)) == first, "another connection, another answer") }
        let servedAfter = try XCTUnwrap(try RawClient(daemon.socket).request("getStatus").result?["requestsServed"] as? Int)
        XCTAssertEqual(servedAfter - servedBefore, 1 + 3 + 2, "getStatus and the five hits since the first")
        // A correlation id goes in at its sorted place, escaped as the encoder escapes it; the rest is unchanged.
        for (sent, written) in [("c-1", "c-1"), (#"quote \" backslash \\ slash /"#, #"quote \" backslash \\ slash /"#),
                                ("", "")] {
            let answer = try answerLine(raw, silentLine(hid, extra: #","correlationId":"\#(sent)""#))
            let member = #""correlationId":"\#(written)","#
            XCTAssertTrue(answer.contains(#""authority":"#) && answer.contains(member), "correlationId \(written) missing")
            XCTAssertTrue(answer.replacingOccurrences(of: member, with: "") == first, "correlationId \(written): more changed")
            let keys = answer.components(separatedBy: member)[0].hasSuffix(#"","#)
            XCTAssertTrue(keys, "correlationId follows authority (keys sorted)")
        }
        // A null correlation id is no correlation id; a request with another id keeps its own id.
        XCTAssertTrue(try answerLine(raw, silentLine(hid, extra: #","correlationId":null"#)) == first, "null correlationId")
        let other = try answerLine(raw, silentLine(hid, id: 42))
        XCTAssertTrue(other == first.replacingOccurrences(of: #"{"jsonrpc":"2.0","id":1,"#, with: #"{"jsonrpc":"2.0","id":42,"#), "id 42")
        // A correlation id that is not a string is still refused, remembered answer or not.
        let refused = try JSONSerialization.jsonObject(with: Data(try answerLine(raw, silentLine(hid, extra: #","correlationId":7"#)).utf8))
        XCTAssertEqual((refused as? [String: Any])?.errorCode, RPCErrorCode.invalidParams)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 0, "every answer came from the cache")
    }

    func testARememberedAnswerGoesWithTheTokenItCarries() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let hid = try signIn(daemon)
        let raw = try RawClient(daemon.socket)
        let signedIn = try result(try answerLine(raw, silentLine(hid)))["accessToken"] as? String
        XCTAssertTrue(try result(try answerLine(raw, silentLine(hid)))["accessToken"] as? String == signedIn)

        // A refresh changes the cache: the next plain request gets the new token.
        let refreshed = try result(try answerLine(raw, silentLine(hid, extra: #","forceRefresh":true"#)))
        XCTAssertEqual(refreshed["source"] as? String, "refresh")
        XCTAssertTrue(refreshed["accessToken"] as? String != signedIn)
        let afterRefresh = try result(try answerLine(raw, silentLine(hid)))
        XCTAssertTrue(afterRefresh["accessToken"] as? String == refreshed["accessToken"] as? String, "the token before the refresh")
        XCTAssertEqual(afterRefresh["source"] as? String, "cache")

        // A token that enters its 5-minute buffer is no longer handed out: the same request then refreshes.
        try idp.control("/test/config?access_token_expire_seconds=302")
        let shortLived = try result(try answerLine(raw, silentLine(hid, extra: #","forceRefresh":true"#)))
        let shortToken = try XCTUnwrap(shortLived["accessToken"] as? String)
        XCTAssertTrue(try result(try answerLine(raw, silentLine(hid)))["accessToken"] as? String == shortToken)
        try idp.control("/test/config?access_token_expire_seconds=3600")
        try idp.control("/test/reset-counters")
        let expiresOn = try XCTUnwrap(shortLived["expiresOn"] as? Int)
        // One second past the buffer's edge: brokerd reads its clock in whole seconds, and this loop may end early in the
        // second that brokerd still counts as outside the buffer.
        while Int(Date().timeIntervalSince1970) < expiresOn - 299 { try await Task.sleep(for: .milliseconds(200)) }
        let renewed = try result(try answerLine(raw, silentLine(hid)))
        XCTAssertEqual(renewed["source"] as? String, "refresh", "a token inside its buffer came back from the memo")
        XCTAssertTrue(renewed["accessToken"] as? String != shortToken)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 1)

        // Removal from the app: the same request is now InteractionRequired, not the remembered token.
        XCTAssertEqual(try result(try answerLine(raw, silentLine(hid)))["source"] as? String, "cache")
        let removed = try raw.request("removeAccount", ["clientId": testClient, "account": ["homeAccountId": hid]], id: 2)
        XCTAssertNotNil(removed["result"], "\(removed)")
        let afterRemoval = try JSONSerialization.jsonObject(with: Data(try answerLine(raw, silentLine(hid)).utf8))
        XCTAssertEqual((afterRemoval as? [String: Any])?.errorCode, RPCErrorCode.interactionRequired)
        XCTAssertFalse(daemon.log.contains(shortToken), "an access token reached the log")
    }

    /// An app that never asks the same line twice makes the memo give up (`MemoUsefulness`: after 128 answers kept and
    /// none served, one line in 16 is looked up). Its answers stay byte for byte the full path's through the change, a
    /// refresh in the middle is seen at once, and when it repeats itself again the answers are still right.
    func testAnAppThatNeverRepeatsItselfIsAnsweredRightAsTheMemoGivesUpAndComesBack() async throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let hid = try signIn(daemon)
        let raw = try RawClient(daemon.socket)
        let plain = silentLine(hid)
        /// The same request spaced out: another line to the memo, the same answer.
        func spaced(_ n: Int) -> String { plain.replacingOccurrences(of: #""scopes":"#, with: #""scopes":"# + String(repeating: " ", count: n)) }
        let first = try answerLine(raw, plain)
        for n in 1...200 { XCTAssertTrue(try answerLine(raw, spaced(n)) == first, "line \(n) spaced out, another answer") }

        let refreshed = try result(try answerLine(raw, silentLine(hid, extra: #","forceRefresh":true"#)))
        XCTAssertEqual(refreshed["source"] as? String, "refresh")
        let newToken = try XCTUnwrap(refreshed["accessToken"] as? String)
        let afterRefresh = try answerLine(raw, spaced(201))
        XCTAssertTrue(try result(afterRefresh)["accessToken"] as? String == newToken, "the token before the refresh")
        for n in 202...240 { XCTAssertTrue(try answerLine(raw, spaced(n)) == afterRefresh, "line \(n) after the refresh") }
        // The app repeats itself again: the probes find the memo useful, and the answers are the same bytes.
        for round in 0..<60 { XCTAssertTrue(try answerLine(raw, spaced(201)) == afterRefresh, "repeat \(round)") }
        XCTAssertTrue(try answerLine(raw, plain) == afterRefresh, "the plain line")
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 1, "one refresh, every other answer from the cache")
        XCTAssertFalse(daemon.log.contains(newToken), "an access token reached the log")
    }
}
