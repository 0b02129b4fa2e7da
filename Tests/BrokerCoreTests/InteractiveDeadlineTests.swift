import BrokerCache
@testable import BrokerCore
import BrokerPlatform
import Logging
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A caller's own deadline for a whole sign-in (`InteractiveTokenRequest.timeLimitSeconds`, which the D-Bus front end
/// sets under its clients' 300 s call timeout) is kept by the core: a sign-in still running at it ends as
/// UserCanceled, even while a request to the IdP is held far longer than the limit.
final class InteractiveDeadlineTests: XCTestCase {
    func testASignInPastItsTimeLimitEndsAsCanceledWhileTheIdPHoldsTheRequest() async throws {
        let server = try HoldingIdP()
        defer { server.stop() }
        let identity = try IdPClient(settings: .init(allowLoopbackHTTP: true, requestTimeoutSeconds: 120,
                                                     microsoftBaseURL: "https://127.0.0.1:9"))
        addTeardownBlock { await identity.shutdown() }
        let broker = Broker(store: CacheStore(path: "/nonexistent/cache.db", keyStore: .memory), identity: identity,
                            logger: Logger(label: "interactive-deadline-tests"))
        try await broker.start()
        let request = InteractiveTokenRequest(clientId: "client-a", authority: server.authority, scopes: ["mail.read"],
                                              flow: .deviceCode, timeLimitSeconds: 2)
        do {
            _ = try await broker.acquireTokenInteractively(request) { _ in }
            XCTFail("a sign-in whose device authorization request is held cannot succeed")
        } catch {
            // Without the deadline the held request would end at request_timeout (120 s) as -50006 unavailable.
            guard case .userCanceled = error else { return XCTFail("expected userCanceled at the time limit, got \(error)") }
        }
        XCTAssertEqual(server.held, 1, "the device authorization request reached the IdP and was held")
    }
}

/// An IdP on loopback that serves its discovery document and holds every other request without answering.
private final class HoldingIdP: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let state = Locked((held: [Int32](), stopped: false))
    var authority: String { "http://127.0.0.1:\(port)/tenant" }
    var held: Int { state.withLock { $0.held.count } }

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 16) == 0 else { throw FileError(operation: "bind", path: "127.0.0.1", code: errno) }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        let base = "http://127.0.0.1:\(port)/tenant"
        let document = """
            {"issuer":"\(base)/v2.0","authorization_endpoint":"\(base)/oauth2/v2.0/authorize",\
            "token_endpoint":"\(base)/oauth2/v2.0/token","device_authorization_endpoint":"\(base)/oauth2/v2.0/devicecode"}
            """
        let state = self.state
        guard PlatformThread.detach({ Self.serve(listener, document: document, state: state) }) else {
            throw FileError(operation: "start a thread", path: "", code: EAGAIN)
        }
    }

    private static func serve(_ listener: Int32, document: String, state: Locked<(held: [Int32], stopped: Bool)>) {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }  // the listener was shut down
            var buffer = [UInt8](repeating: 0, count: 8192)
            let count = read(connection, &buffer, buffer.count)
            let head = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
            if head.hasPrefix("GET ") && head.contains("openid-configuration") {
                let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(document.utf8.count)\r\n"
                    + "Connection: close\r\n\r\n" + document
                _ = answer.withCString { write(connection, $0, strlen($0)) }
                close(connection)
            } else {
                state.withLock { $0.held.append(connection) }  // never answered
            }
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for connection in state.withLock({ $0.held }) { close(connection) }
    }
}
