import Foundation
import XCTest

/// After a cache hit, a connection waits for the app's next request in a blocking read (ClientConnection,
/// `readNextHit`). That read is bounded: a connection in it is still evicted for a newcomer, still ends when the
/// client closes its end, and still goes back to the line timeout when only half a line comes.
final class NextHitReadTests: XCTestCase {
    private let authority = "https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001"

    private func hitLine(id: Int) -> String {
        #"{"jsonrpc":"2.0","id":\#(id),"method":"acquireTokenSilently","params":{"clientId":"client-a","authority":"\#(authority)","scopes":["User.Read"],"account":{"homeAccountId":"\#(CacheFixture.alice)"}}}"#
            + "\n"
    }

    private func daemonWithACache(config: String) throws -> Daemon {
        let daemon = try Daemon(config: config)
        try daemon.start()
        let input = daemon.directory.path + "/cache.json"
        try CacheFixture.twoAppsTwoAccounts.json.write(toFile: input, atomically: true, encoding: .utf8)
        let imported = try daemon.ctl(["import", input])
        XCTAssertEqual(imported.status, 0, imported.stderr)
        return daemon
    }

    /// Two hits in a row, the second answered from the connection's memory: the connection is now in its blocking read.
    private func twoHits(_ client: RawClient) throws {
        for id in 1...2 {
            try client.send(hitLine(id: id))
            let answer = try client.readMessage()
            XCTAssertEqual((answer["result"] as? [String: Any])?["source"] as? String, "cache", "\(answer.keys)")
        }
    }

    func testAConnectionWaitingForItsNextHitIsEvictedForANewcomer() throws {
        // One connection at most: the newcomer gets in only if the waiting one makes room, within the newcomer's
        // half second of patience (a read that waited for ever would keep it busy, and the newcomer refused).
        let daemon = try daemonWithACache(config: "max_connections = 1\nmax_connections_per_process = 1\n")
        defer { XCTAssertEqual(daemon.stop(), 0, daemon.log) }
        let waiting = try RawClient(daemon.socket, receiveTimeout: 30)
        try twoHits(waiting)

        let newcomer = try RawClient(daemon.socket, receiveTimeout: 30).request("getBrokerVersion")
        XCTAssertNotNil(newcomer["result"], "\(newcomer)")
        let evicted = try waiting.readMessage()
        XCTAssertEqual(evicted.errorCode, -32002, "\(evicted)")
        XCTAssertTrue(waiting.isClosedByServer())
    }

    func testAClientThatClosesItsEndAfterAHitGetsEndOfFile() throws {
        let daemon = try daemonWithACache(config: "idle_timeout = 120\n")
        defer { XCTAssertEqual(daemon.stop(), 0, daemon.log) }
        let client = try RawClient(daemon.socket, receiveTimeout: 30)
        try twoHits(client)
        try client.send(hitLine(id: 3))
        shutdown(client.fd, Int32(SHUT_WR))
        XCTAssertEqual(try client.readMessage()["id"] as? Int, 3)
        XCTAssertTrue(client.isClosedByServer(), "no end of file after the last answer")
    }

    func testHalfALineAfterAHitStillGetsTheLineTimeout() throws {
        let daemon = try daemonWithACache(config: "line_timeout = 1\nidle_timeout = 3600\n")
        defer { XCTAssertEqual(daemon.stop(), 0, daemon.log) }
        let client = try RawClient(daemon.socket, receiveTimeout: 60)
        try twoHits(client)
        try client.send(LimitTestSupport.halfALine)
        let error = try client.readMessage()
        XCTAssertEqual(error.errorCode, -32600, "\(error)")
        XCTAssertEqual(error.errorMessage,
                       "invalid request: incomplete line (no newline within 1 s of its start); the connection is closed")
        XCTAssertTrue(client.isClosedByServer())
    }
}
