import Foundation
import XCTest

/// The connection caps never lock other apps out: one process that opens a thousand connections and leaves each
/// with half a request loses its own oldest ones, while another process (python3, brokerctl) is answered throughout.
final class ConnectionCapTests: XCTestCase {
    private static let stalledConnections = 1000

    override func setUpWithError() throws {
        try LimitTestSupport.raiseDescriptorLimit(atLeast: Self.stalledConnections + 200)
    }

    /// Opens `count` connections that each send half a request and stall; every 100, another process asks.
    private func stallConnections(_ count: Int, daemon: Daemon) throws -> [RawClient] {
        var stalled: [RawClient] = []
        for index in 1...count {
            let client = try RawClient(daemon.socket, receiveTimeout: 5)
            try client.send(LimitTestSupport.halfALine)
            stalled.append(client)
            if index % 100 == 0 {
                let answer = try LimitTestSupport.probeFromAnotherProcess(daemon.socket)
                XCTAssertNotNil(answer.result, "another process was not served after \(index) stalled connections: \(answer)")
            }
        }
        return stalled
    }

    /// The lines already sent on each client (read once: a second look finds only the end of the stream), by index.
    private func linesAlreadySent(_ clients: [RawClient]) throws -> [Int: [String: Any]] {
        var lines: [Int: [String: Any]] = [:]
        for (index, client) in clients.enumerated() {
            guard let line = LimitTestSupport.lineAlreadySent(on: client) else { continue }
            lines[index] = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
        }
        return lines
    }

    func testAThousandStalledConnectionsOfOneProcessLeaveOtherProcessesServed() throws {
        // The line timeout is long here, so only the per-process cap keeps the slots free.
        let daemon = try Daemon(config: "line_timeout = 600\n")
        try daemon.start()
        let stalled = try stallConnections(Self.stalledConnections, daemon: daemon)

        // The last probe came after every stalled connection in the accept queue, so all of them were admitted.
        let status = try LimitTestSupport.probeFromAnotherProcess(daemon.socket)
        let connections = try XCTUnwrap(status.result?["connections"] as? Int, "\(status)")
        XCTAssertLessThanOrEqual(connections, 64 + 1, "the test process holds at most max_connections_per_process")

        // Each connection over the per-process cap closed that process's own longest-idle one, with a -32002 line.
        let evicted = try linesAlreadySent(stalled)
        XCTAssertEqual(evicted.count, Self.stalledConnections - 64, String(daemon.log.suffix(2000)))
        for line in evicted.values {
            XCTAssertEqual(line.errorCode, -32002, "\(line)")
            XCTAssertTrue(line.errorMessage?.contains("same process") ?? false, "\(line)")
        }
        // The oldest were closed first: the survivors are the newest ones.
        XCTAssertEqual(Set(0..<Self.stalledConnections).subtracting(evicted.keys),
                       Set((Self.stalledConnections - 64)..<Self.stalledConnections))

        // The real CLI, a third process, is served too.
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    func testAtTheGlobalCapTheLongestIdleConnectionMakesRoomButNotASubscribedOne() throws {
        // No per-process cap to speak of: the global cap and its eviction must keep the daemon open to others.
        let daemon = try Daemon(config: "max_connections = 50\nmax_connections_per_process = 5000\nline_timeout = 600\n")
        try daemon.start()
        // The oldest connection has subscribed: it waits for events and must not be taken for an idle one.
        let subscriber = try RawClient(daemon.socket)
        XCTAssertNotNil(try subscriber.request("subscribe").result)

        let stalled = try stallConnections(Self.stalledConnections, daemon: daemon)
        let status = try LimitTestSupport.probeFromAnotherProcess(daemon.socket)
        XCTAssertLessThanOrEqual(try XCTUnwrap(status.result?["connections"] as? Int, "\(status)"), 50)
        let evicted = try linesAlreadySent(stalled).values
        XCTAssertGreaterThanOrEqual(evicted.count, Self.stalledConnections - 50)
        for line in evicted where line.errorCode != -32002 { XCTFail("not an eviction: \(line)") }

        XCTAssertNil(LimitTestSupport.lineAlreadySent(on: subscriber), "the subscribed connection was closed")
        XCTAssertNotNil(try subscriber.request("getBrokerVersion", id: 2).result)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    func testWhenEveryConnectionIsBusyTheNewcomerIsRefused() throws {
        let daemon = try Daemon(config: "max_connections = 3\n")
        try daemon.start()
        var subscribers: [RawClient] = []
        for _ in 0..<3 {
            let client = try RawClient(daemon.socket)
            XCTAssertNotNil(try client.request("subscribe").result)
            subscribers.append(client)
        }
        let refused = try RawClient(daemon.socket).request("getStatus")
        XCTAssertEqual(refused.errorCode, -32002, "\(refused)")
        XCTAssertTrue(refused.errorMessage?.contains("all of them are busy") ?? false, "\(refused)")
        // Once one goes, there is room again.
        subscribers.removeLast()
        var served = false
        for _ in 0..<200 where !served {
            served = (try? RawClient(daemon.socket).request("getStatus").result) != nil
            if !served { usleep(20_000) }
        }
        XCTAssertTrue(served, daemon.log)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// Started with a soft descriptor limit lower than max_connections needs (as systemd's 1024 would be for a few
    /// thousand), brokerd raises it to the hard limit and admits every connection.
    func testTheSoftDescriptorLimitIsRaisedWhenMaxConnectionsNeedsIt() throws {
        let daemon = try Daemon(config: "max_connections = 600\nmax_connections_per_process = 600\nline_timeout = 600\n")
        let process = try daemon.launch(prefix: ["/bin/sh", "-c", #"ulimit -Sn 256 && exec "$0" "$@""#])
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        try daemon.waitUntilServing()
        let limits = try String(contentsOfFile: "/proc/\(process.processIdentifier)/limits", encoding: .utf8)
        let openFiles = try XCTUnwrap(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let soft = try XCTUnwrap(Int(openFiles.split(separator: " ", omittingEmptySubsequences: true)[3]), String(openFiles))
        XCTAssertGreaterThanOrEqual(soft, 2 * 600 + 256, "a socket and an eventfd per connection, and 256: \(openFiles)")

        let stalled = try (0..<400).map { _ in try RawClient(daemon.socket) }
        for client in stalled { try client.send(LimitTestSupport.halfALine) }
        let status = try LimitTestSupport.probeFromAnotherProcess(daemon.socket)
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(status.result?["connections"] as? Int, "\(status)"), 400)
        XCTAssertTrue(try linesAlreadySent(stalled).isEmpty, "no connection had to make room")
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, daemon.log)
    }
}
