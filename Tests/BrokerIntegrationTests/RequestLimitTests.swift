import Foundation
import XCTest

/// Per-connection limits against the real daemon: batch size, batch members holding in-flight slots, the timeout of
/// a begun line, and a client that writes without reading (brokerd's memory stays bounded).
final class RequestLimitTests: XCTestCase {
    private static func batch(_ count: Int, method: String) -> String {
        "[" + (1...count).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"\#(method)"}"# }.joined(separator: ",") + "]\n"
    }

    func testOversizedBatchIsRefusedWholeAndTheConnectionStaysUsable() throws {
        let daemon = try Daemon()
        try daemon.start()
        let client = try RawClient(daemon.socket)
        // The attack: one line that would start thousands of exports.
        try client.send(Self.batch(5000, method: "exportCache"))
        let refused = try XCTUnwrap(try client.readJSON() as? [String: Any], "a single error, not an array")
        XCTAssertEqual(refused.errorCode, -32600)
        XCTAssertTrue(refused["id"] is NSNull)
        XCTAssertEqual(refused.errorMessage, "invalid request: a batch may have at most 100 members; this one has 5000")

        // At the limit, a batch is served, on the same connection.
        try client.send(Self.batch(100, method: "getBrokerVersion"))
        let answers = try XCTUnwrap(try client.readJSON() as? [[String: Any]])
        XCTAssertEqual(answers.count, 100)
        XCTAssertEqual(Set(answers.compactMap { $0["id"] as? Int }), Set(1...100))
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    func testBatchMembersEachHoldAnInFlightSlot() throws {
        let idp = try TestIdP()
        let config = idp.brokerConfig(extra: "max_requests_in_flight = 2\n")
            .replacingOccurrences(of: "open_browser = \"always\"", with: "open_browser = \"never\"")
        let daemon = try Daemon(config: config)
        try daemon.start()
        // Three sign-ins that wait for a browser that never comes, in one batch, with room for two at a time.
        func signIn(_ id: Int, _ hint: String) -> String {
            #"{"jsonrpc":"2.0","id":\#(id),"method":"acquireTokenInteractively","params":{"clientId":"brokerd-test-app-a","#
                + #""scopes":["mail.read"],"loginHint":"\#(hint)"}}"#
        }
        let batchClient = try RawClient(daemon.socket, receiveTimeout: 30)
        try batchClient.send("[" + signIn(1, "first") + "," + signIn(2, "second") + "," + signIn(3, "third") + "]\n")
        var started: [String: String] = [:]  // login hint → requestId
        func nextStarted(on client: RawClient) throws -> (hint: String, requestId: String) {
            let notification = try client.readMessage()
            XCTAssertEqual(notification["method"] as? String, "browserUrl", "\(notification)")
            let params = try XCTUnwrap(notification["params"] as? [String: Any])
            let url = try XCTUnwrap(params["url"] as? String)
            let hint = try XCTUnwrap(URLComponents(string: url)?.queryItems?.first { $0.name == "login_hint" }?.value)
            return (hint, try XCTUnwrap(params["requestId"] as? String))
        }
        for _ in 0..<2 {
            let (hint, requestId) = try nextStarted(on: batchClient)
            started[hint] = requestId
        }
        XCTAssertEqual(Set(started.keys), ["first", "second"], "members start in order, two at a time")

        // The third member waits for a slot: its sign-in is not running, so another connection may start the same one.
        let other = try RawClient(daemon.socket, receiveTimeout: 30)
        try other.send(signIn(9, "third") + "\n")
        let otherFlow = try nextStarted(on: other)
        XCTAssertEqual(otherFlow.hint, "third", "the batch's third member must not be running yet")
        try cancel(otherFlow.requestId, daemon: daemon)
        XCTAssertEqual(try other.readMessage().errorCode, -50005)

        // One member ends: its slot goes to the third, which starts now.
        try cancel(try XCTUnwrap(started["first"]), daemon: daemon)
        let third = try nextStarted(on: batchClient)
        XCTAssertEqual(third.hint, "third")
        try cancel(try XCTUnwrap(started["second"]), daemon: daemon)
        try cancel(third.requestId, daemon: daemon)
        let answers = try XCTUnwrap(try batchClient.readJSON() as? [[String: Any]], "one array for the whole batch")
        XCTAssertEqual(answers.count, 3)
        XCTAssertEqual(Set(answers.compactMap { $0["id"] as? Int }), [1, 2, 3])
        XCTAssertTrue(answers.allSatisfy { $0.errorCode == -50005 }, "\(answers)")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    private func cancel(_ requestId: String, daemon: Daemon) throws {
        let answer = try RawClient(daemon.socket).call(
            #"{"jsonrpc":"2.0","id":1,"method":"cancelInteractiveFlow","params":{"requestId":"\#(requestId)"}}"#)
        XCTAssertEqual(answer.result?["canceled"] as? Bool, true, "\(answer)")
    }

    func testHalfALineGetsTheLineTimeoutThenAnErrorAndTheClose() throws {
        // The idle timeout is far away: only the line timeout can end this connection.
        let daemon = try Daemon(config: "line_timeout = 1\nidle_timeout = 3600\n")
        try daemon.start()
        // A line sent in two parts is one request.
        let client = try RawClient(daemon.socket, receiveTimeout: 60)
        try client.send(#"{"jsonrpc":"2.0","id":7,"#)
        try client.send(#""method":"getBrokerVersion"}"# + "\n")
        XCTAssertEqual(try client.readMessage()["id"] as? Int, 7)

        try client.send(LimitTestSupport.halfALine)
        let error = try client.readMessage()
        XCTAssertEqual(error.errorCode, -32600, "\(error)")
        XCTAssertTrue(error["id"] is NSNull)
        XCTAssertEqual(error.errorMessage,
                       "invalid request: incomplete line (no newline within 1 s of its start); the connection is closed")
        XCTAssertTrue(client.isClosedByServer())
        XCTAssertTrue(daemon.log.contains("a request line was not finished in time"), daemon.log)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    func testAClientThatWritesWithoutReadingDoesNotGrowTheDaemonsMemory() throws {
        let daemon = try Daemon()
        try daemon.start()
        for _ in 0..<20 { XCTAssertNotNil(try RawClient(daemon.socket).request("getStatus").result) }
        let baseline = try LimitTestSupport.residentKiB(of: daemon.pid)

        // 80,000 requests (4.8 MB); answered, they would be 26 MB that this client never reads: more than the RSS
        // growth allowed below, so a daemon that kept reading and queueing answers would fail the test.
        let count = 80_000
        var payload: [UInt8] = []
        for id in 1...count { payload += Array(#"{"jsonrpc":"2.0","id":\#(id),"method":"getBrokerVersion"}"#.utf8) + [0x0A] }
        let greedy = try RawClient(daemon.socket, receiveTimeout: 60)
        let writer = BackgroundWriter(client: greedy, payload: payload)

        // Wait until the writer is done or stuck, watching brokerd's memory meanwhile.
        var peak = baseline, unchanged = 0, lastSent = -1
        while !writer.isDone, unchanged < 8 {
            usleep(250_000)
            peak = max(peak, try LimitTestSupport.residentKiB(of: daemon.pid))
            let sent = writer.sent
            unchanged = sent == lastSent ? unchanged + 1 : 0
            lastSent = sent
        }
        XCTAssertFalse(writer.isDone, "brokerd read all 4.8 MB although the client read no answer")
        XCTAssertLessThan(peak - baseline, 16 * 1024, "brokerd's RSS grew from \(baseline) KiB to \(peak) KiB")
        XCTAssertNotNil(try RawClient(daemon.socket).request("getStatus").result, "others are served meanwhile")

        // Nothing was lost, and the stalled connection was not closed: once the client reads, every answer comes.
        XCTAssertEqual(try Self.countLines(on: greedy, until: count), count)
        writer.wait()
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    func testEventsForASubscriberThatDoesNotReadAreDroppedNotQueued() throws {
        let daemon = try Daemon()
        try daemon.start()
        let subscribe = #"{"jsonrpc":"2.0","id":0,"method":"subscribe","params":{"events":["statusChanged"]}}"#
        let deaf = try RawClient(daemon.socket, receiveTimeout: 60), listener = try RawClient(daemon.socket, receiveTimeout: 60)
        XCTAssertNotNil(try deaf.call(subscribe).result)
        XCTAssertNotNil(try listener.call(subscribe).result)

        // The deaf subscriber sends requests and reads no answer, until brokerd stops reading from it.
        let count = 20_000
        var payload: [UInt8] = []
        for id in 1...count { payload += Array(#"{"jsonrpc":"2.0","id":\#(id),"method":"getBrokerVersion"}"#.utf8) + [0x0A] }
        let writer = BackgroundWriter(client: deaf, payload: payload)
        var unchanged = 0, lastSent = -1
        while !writer.isDone, unchanged < 8 {
            usleep(250_000)
            unchanged = writer.sent == lastSent ? unchanged + 1 : 0
            lastSent = writer.sent
        }
        XCTAssertFalse(writer.isDone, "brokerd read everything although the client read nothing")

        // Events happen meanwhile: the listening subscriber gets every one.
        let events = 1000
        let importer = try RawClient(daemon.socket)
        for _ in 1...events {
            XCTAssertNotNil(try importer.call(#"{"jsonrpc":"2.0","id":1,"method":"importCache","params":{"format":"msal","data":"{}"}}"#).result)
        }
        var heard = 0
        while heard < events { if try listener.readMessage()["method"] as? String == "statusChanged" { heard += 1 } }

        // The deaf one gets every answer once it reads, but the events made while it did not read were dropped.
        var answers = 0, deafEvents = 0
        while answers < count, let line = try deaf.readLine() {
            if line.contains(#""method":"statusChanged""#) { deafEvents += 1 } else { answers += 1 }
        }
        XCTAssertEqual(answers, count)
        XCTAssertLessThan(deafEvents, events / 2, "events queued for a client that did not read")
        writer.wait()
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// Counts answer lines (without parsing them) until `expected` arrived or the connection ends.
    private static func countLines(on client: RawClient, until expected: Int) throws -> Int {
        var lines = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while lines < expected {
            let n = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            lines += chunk.withUnsafeBytes { raw in
                var found = 0, offset = 0
                while offset < n, let hit = memchr(raw.baseAddress! + offset, 0x0A, n - offset) {
                    found += 1
                    offset = raw.baseAddress!.distance(to: UnsafeRawPointer(hit)) + 1
                }
                return found
            }
        }
        return lines
    }
}

/// Writes a payload on a thread of its own with blocking sends, so the test can watch it stall.
private final class BackgroundWriter: @unchecked Sendable {
    private let lock = NSLock()
    private var sentBytes = 0
    private var done = false
    private let finished = DispatchSemaphore(value: 0)

    init(client: RawClient, payload: [UInt8]) {
        let thread = Thread { [self] in
            var offset = 0
            while offset < payload.count {
                let n = payload.withUnsafeBytes {
                    send(client.fd, $0.baseAddress! + offset, min(1 << 16, payload.count - offset), Int32(MSG_NOSIGNAL))
                }
                if n < 0, errno == EINTR || errno == EAGAIN { continue }
                if n <= 0 { break }
                offset += n
                lock.withLock { sentBytes = offset }
            }
            lock.withLock { done = true }
            finished.signal()
        }
        thread.start()
    }

    var sent: Int { lock.withLock { sentBytes } }
    var isDone: Bool { lock.withLock { done } }
    func wait() { finished.wait() }
}
