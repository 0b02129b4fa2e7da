import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// Every request is in the log with its caller; a request repeated by the same process with the same outcome is
/// counted (`repeated=N`) instead of written again, and the counts are written at the latest when brokerd stops.
final class RequestLogTests: XCTestCase {
    func testRepeatedCacheHitsAreCountedAndEveryRequestIsAccountedFor() async throws {
        let daemon = try Daemon()
        try daemon.start()
        let connection = BrokerConnection(socketPath: daemon.socket)
        // A tenant id, not a name: a tenant name would need discovery on the network before the cache is looked at.
        let tenant = "00000000-0000-0000-0000-0000000000aa", hid = "00000000-0000-0000-0000-000000000001." + tenant
        let document = CrashSafetyTests.document(7).replacingOccurrences(of: #""realm": "aa""#, with: #""realm": "\#(tenant)""#)
        _ = try await connection.call(.importCache, ImportCacheParams(data: document), as: ImportResult.self)
        await connection.disconnect()

        let line = #"{"jsonrpc":"2.0","id":1,"method":"acquireTokenSilently","params":{"clientId":"crash-client","authority":"https://login.microsoftonline.com/\#(tenant)","scopes":["generation.7"],"account":{"homeAccountId":"\#(hid)"}}}"#
        let raw = try RawClient(daemon.socket)
        let hits = 300
        for _ in 0..<hits {
            try raw.send(line + "\n")
            XCTAssertTrue(try XCTUnwrap(raw.readLine()).contains(#""result""#))
        }
        let unknown = #"{"jsonrpc":"2.0","id":2,"method":"noSuchMethod"}"#
        try raw.send(unknown + "\n")
        _ = try raw.readLine()
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0)  // another process: a line of its own
        XCTAssertEqual(daemon.stop(), 0)

        let lines = daemon.log.split(separator: "\n").filter { $0.contains(" request ") || $0.hasSuffix(" request") }
        let silent = lines.filter { $0.contains("method=acquireTokenSilently") && $0.contains("outcome=ok") }
        let accounted = silent.reduce(0) { total, line in
            let repeated = line.split(separator: " ").first { $0.hasPrefix("repeated=") }
            return total + (repeated.flatMap { Int($0.dropFirst("repeated=".count)) } ?? 1)
        }
        XCTAssertEqual(accounted, hits, "every hit is accounted for: \(silent)")
        XCTAssertLessThan(silent.count, hits / 2, "repeats are counted, not written one by one")
        XCTAssertTrue(silent.allSatisfy { $0.contains("client_exe=") && $0.contains("client_pid=\(getpid())") })
        XCTAssertTrue(lines.contains { $0.contains("method=noSuchMethod") && $0.contains("outcome=error -32601") },
                      "another outcome is a line of its own")
        XCTAssertTrue(lines.contains { $0.contains("method=getStatus") && $0.contains("brokerctl") }, daemon.log)
    }
}
