import Foundation
import XCTest

/// Bad input of every kind against the real daemon: each gets the right JSON-RPC error or a closed connection,
/// and the daemon keeps serving every other client.
final class ProtocolRobustnessTests: XCTestCase {
    var daemon: Daemon!

    override func setUpWithError() throws {
        daemon = try Daemon(config: "idle_timeout = 2\nmax_connections = 40\n")
        try daemon.start()
    }

    override func tearDownWithError() throws {
        assertStillServing()
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        daemon = nil
    }

    private func assertStillServing(file: StaticString = #filePath, line: UInt = #line) {
        do {
            let answer = try RawClient(daemon.socket).request("getStatus")
            XCTAssertNotNil(answer.result, "daemon stopped serving", file: file, line: line)
        } catch {
            XCTFail("daemon stopped serving: \(error)\n\(daemon.log)", file: file, line: line)
        }
    }

    func testNotJSONIsAParseError() throws {
        let client = try RawClient(daemon.socket)
        for garbage in ["hello", "{\"jsonrpc\": \"2.0\", \"method\": ", "[1, 2", "{}}", "nul"] {
            let answer = try client.call(garbage)
            XCTAssertEqual(answer.errorCode, -32700, garbage)
            XCTAssertTrue(answer["id"] is NSNull, garbage)
        }
        // The connection is still usable afterwards.
        XCTAssertNotNil(try client.request("getBrokerVersion").result)
    }

    func testInvalidUTF8IsAParseError() throws {
        let client = try RawClient(daemon.socket)
        try client.send(Array(#"{"jsonrpc":"2.0","id":1,"method":"getAccounts","params":{"clientId":""#.utf8)
                        + [0xC3, 0x28, 0xFF] + Array("\"}}\n".utf8))
        let answer = try XCTUnwrap(try client.readJSON() as? [String: Any])
        XCTAssertEqual(answer.errorCode, -32700)
        XCTAssertTrue(answer.errorMessage?.contains("UTF-8") ?? false, "\(answer)")
    }

    func testInvalidRequestsAndWrongTypes() throws {
        let client = try RawClient(daemon.socket)
        let cases: [(String, Int)] = [
            (#"{"id":1,"method":"getStatus"}"#, -32600),                          // no "jsonrpc"
            (#"{"jsonrpc":"1.0","id":1,"method":"getStatus"}"#, -32600),
            (#"{"jsonrpc":"2.0","id":1,"method":42}"#, -32600),
            (#"{"jsonrpc":"2.0","id":{"a":1},"method":"getStatus"}"#, -32600),
            (#"{"jsonrpc":"2.0","id":1,"method":"getStatus","params":[1,2]}"#, -32602),
            (#"{"jsonrpc":"2.0","id":1,"method":"noSuchMethod"}"#, -32601),
            (#"{"jsonrpc":"2.0","id":1,"method":"getAccount","params":{"clientId":5}}"#, -32602),
            (#"{"jsonrpc":"2.0","id":1,"method":"getAccount","params":{"homeAccountId":"x"}}"#, -32602),
            (#"{"jsonrpc":"2.0","id":1,"method":"getAccount","params":{"clientId":"c"}}"#, -32602),
            (#"{"jsonrpc":"2.0","id":1,"method":"removeAccount","params":{"clientId":"c","account":7}}"#, -32602),
            (#"{"jsonrpc":"2.0","id":1,"method":"importCache","params":{"format":"adal","data":"{}"}}"#, -32602),
            (#"{"jsonrpc":"2.0","id":1,"method":"importCache","params":{"format":"msal","data":"[1]"}}"#, -32602),
            ("42", -32600),
            ("[]", -32600),
        ]
        for (line, code) in cases {
            let answer = try client.call(line)
            XCTAssertEqual(answer.errorCode, code, "\(line) → \(answer)")
        }
        let mistyped = try client.call(#"{"jsonrpc":"2.0","id":"x","method":"getAccount","params":{"clientId":5}}"#)
        XCTAssertEqual(mistyped["id"] as? String, "x")
        XCTAssertEqual(mistyped.errorMessage, "invalid params for getAccount: parameter 'clientId' must be a string")
    }

    func testBatchesAndNotifications() throws {
        let client = try RawClient(daemon.socket)
        // A notification gets no answer: the next line read is the answer to the request after it.
        try client.send(#"{"jsonrpc":"2.0","method":"getStatus"}"# + "\n")
        let next = try client.request("getBrokerVersion", id: 77)
        XCTAssertEqual(next["id"] as? Int, 77)

        try client.send(#"[{"jsonrpc":"2.0","id":1,"method":"getBrokerVersion"},{"jsonrpc":"2.0","method":"getStatus"},"#
                        + #"{"jsonrpc":"2.0","id":2,"method":"nope"},17]"# + "\n")
        let batch = try XCTUnwrap(try client.readJSON() as? [[String: Any]])
        XCTAssertEqual(batch.count, 3, "two requests and one invalid element; the notification has no answer")
        XCTAssertNotNil(batch.first { $0["id"] as? Int == 1 }?.result)
        XCTAssertEqual(batch.first { $0["id"] as? Int == 2 }?.errorCode, -32601)
        XCTAssertEqual(batch.first { $0["id"] is NSNull }?.errorCode, -32600)

        // A batch of notifications only: no answer at all.
        try client.send(#"[{"jsonrpc":"2.0","method":"getStatus"}]"# + "\n")
        XCTAssertEqual(try client.request("getBrokerVersion", id: 78)["id"] as? Int, 78)
    }

    func testManyRequestsInFlightOnOneConnectionAreMatchedById() throws {
        let client = try RawClient(daemon.socket)
        var lines = ""
        for id in 1...300 { lines += #"{"jsonrpc":"2.0","id":\#(id),"method":"getStatus"}"# + "\n" }
        try client.send(lines)
        var seen = Set<Int>()
        for _ in 1...300 {
            let answer = try XCTUnwrap(try client.readJSON() as? [String: Any])
            XCTAssertNotNil(answer.result)
            seen.insert(try XCTUnwrap(answer["id"] as? Int))
        }
        XCTAssertEqual(seen, Set(1...300))
    }

    func testTenMebibyteLineIsRefusedAndClosed() throws {
        let client = try RawClient(daemon.socket)
        let huge = #"{"jsonrpc":"2.0","id":1,"method":"importCache","params":{"data":""#
            + String(repeating: "a", count: 10 << 20) + "\"}}\n"
        try? client.send(huge)  // the daemon may close before all of it is written
        let answer = try XCTUnwrap(try client.readJSON() as? [String: Any])
        XCTAssertEqual(answer.errorCode, -32003)
        XCTAssertTrue(client.isClosedByServer())
    }

    func testJustUnderTheLimitIsServed() throws {
        let client = try RawClient(daemon.socket)
        let filler = String(repeating: "a", count: (1 << 20) - 200)
        let answer = try client.call(#"{"jsonrpc":"2.0","id":1,"method":"getStatus","params":{"padding":"\#(filler)"}}"#)
        XCTAssertNotNil(answer.result)
    }

    func testHalfALineThenSilenceIsClosedByTheIdleTimeout() throws {
        let client = try RawClient(daemon.socket, receiveTimeout: 8)
        try client.send(#"{"jsonrpc":"2.0","id":1,"method":"getSta"#)
        let started = Date()
        XCTAssertTrue(client.isClosedByServer(), "a stalled client must be disconnected")
        XCTAssertLessThan(Date().timeIntervalSince(started), 7)
    }

    func testThousandsOfConnectionsStayUnderTheCapAndEveryOneIsServed() throws {
        var clients: [RawClient] = []
        var refused = 0
        // Each connection asks something at once; at the cap of 40, the longest-idle connection (answered already)
        // is closed to make room, so every one is answered and brokerd never holds more than 40.
        for _ in 0..<2000 {
            guard let client = try? RawClient(daemon.socket, receiveTimeout: 5) else { refused += 1; continue }
            try? client.send(#"{"jsonrpc":"2.0","id":1,"method":"getBrokerVersion"}"# + "\n")
            clients.append(client)
        }
        let served = clients.filter { ((try? $0.readJSON()) as? [String: Any])?.result != nil }.count
        // Every connection was answered, so every one was admitted: the evicted ones have their -32002 line or the end
        // of the stream waiting.
        let evicted = clients.filter(LimitTestSupport.hasUnreadInput).count
        XCTAssertEqual(refused, 0)
        XCTAssertEqual(served, 2000)
        XCTAssertEqual(evicted, 2000 - 40, "max_connections = 40: all but the newest 40 were closed")
        let connections = try XCTUnwrap(try RawClient(daemon.socket).request("getStatus").result?["connections"] as? Int)
        XCTAssertLessThanOrEqual(connections, 40)
    }

    func testClientThatNeverReadsDoesNotStopOthers() throws {
        let greedy = try RawClient(daemon.socket)
        var lines = ""
        for id in 1...5000 { lines += #"{"jsonrpc":"2.0","id":\#(id),"method":"getBrokerVersion"}"# + "\n" }
        let payload = lines
        let writer = Thread { try? greedy.send(payload) }
        writer.start()
        usleep(300_000)
        assertStillServing()
    }

    /// The answers, then end of file once the last is written, not at the idle timeout: that is 120 s on this
    /// daemon, and the client gives up reading after 30.
    func testHalfClosedClientGetsItsAnswersThenEndOfFile() throws {
        let patient = try Daemon(config: "idle_timeout = 120\n")
        try patient.start()
        defer { XCTAssertEqual(patient.stop(), 0, patient.log) }
        let client = try RawClient(patient.socket, receiveTimeout: 30)
        try client.send((5...7).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"getBrokerVersion"}"# + "\n" }.joined())
        shutdown(client.fd, Int32(SHUT_WR))
        var ids: Set<Int> = []
        for _ in 5...7 { ids.insert(try XCTUnwrap(try client.readJSON() as? [String: Any])["id"] as? Int ?? 0) }
        XCTAssertEqual(ids, [5, 6, 7])
        XCTAssertTrue(client.isClosedByServer(), "no end of file after the last answer")
    }
}
