import Foundation
import OAuth
import XCTest

/// The loopback listener of a browser sign-in, on a real 127.0.0.1 port, driven by plain HTTP requests as any local
/// process could send them.
final class LoopbackRedirectTests: XCTestCase {
    /// Sends `GET target` and returns the status code of the answer (0 when none came).
    private func get(_ port: Int, _ target: String) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(connected, 0)
        let request = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        XCTAssertEqual(request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, request.count)
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            answer += chunk[0..<count]
        }
        let statusLine = String(decoding: answer, as: UTF8.self).split(separator: "\r\n").first ?? ""
        return Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    func testOnlyTheSignInsOwnStateCompletesIt() async throws {
        let listener = try await LoopbackRedirect.start(expectedState: "the-flows-state")
        let port = listener.port
        let waiting = Task { await listener.nextRedirect() }

        XCTAssertEqual(try get(port, "/?code=injected&state=guessed"), 400, "a wrong state is refused")
        XCTAssertEqual(try get(port, "/?error=access_denied"), 400, "no state is refused, errors included")
        XCTAssertEqual(try get(port, "/?code=injected&state=the-flows-statX"), 400, "same length, one byte off")
        XCTAssertEqual(try get(port, "/favicon.ico"), 404, "not an answer at all")
        XCTAssertEqual(try get(port, "/?code=the-real-one&state=the-flows-state"), 200)

        let query = await waiting.value
        XCTAssertEqual(query?["code"], "the-real-one", "the listener kept waiting through the refused requests")
        await listener.close()
    }

    func testAnErrorWithTheRightStateEndsTheSignIn() async throws {
        let listener = try await LoopbackRedirect.start(expectedState: "s")
        XCTAssertEqual(try get(listener.port, "/?error=access_denied&state=s"), 200)
        let query = await listener.nextRedirect()
        XCTAssertEqual(query?["error"], "access_denied")
        await listener.close()
    }
}
