import Foundation
import XCTest

/// Tests/idp/hostile_idp.py on 127.0.0.1: the authority `<http>/<case>` misbehaves as the case says (see the
/// script's docstring); `normal` behaves.
final class HostileIdP {
    let server: FixtureServer
    let http: String

    init() throws {
        let python = ProcessInfo.processInfo.environment["BROKERD_IDP_PYTHON"] ?? "/usr/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python) else { throw missing("no Python at \(python)") }
        server = try FixtureServer(name: "hostile-idp", command: [python, TestIdP.root + "/Tests/idp/hostile_idp.py"],
                                   environment: ProcessInfo.processInfo.environment)
        http = server.http
    }

    func authority(_ hostileCase: String) -> String { http + "/" + hostileCase }

    /// Every token, refresh token, code and device code handed out so far.
    func secrets() throws -> [String] {
        try server.control("/test/secrets", post: false)["secrets"] as? [String] ?? []
    }

    /// Requests of a case held open now (drip, hang).
    func inFlight(_ hostileCase: String) throws -> Int { try statistic("in_flight", hostileCase) }

    /// Requests of a case received so far.
    func requests(_ hostileCase: String) throws -> Int { try statistic("requests", hostileCase) }

    /// Body bytes a bigbody / endless case got out before the client hung up.
    func bodyBytesSent(_ hostileCase: String) throws -> Int { try statistic("body_bytes", hostileCase) }

    private func statistic(_ table: String, _ hostileCase: String) throws -> Int {
        let values = try server.control("/test/stats", post: false)[table] as? [String: Any]
        return (values?[hostileCase] as? NSNumber)?.intValue ?? 0
    }

    /// Ends every `hang` and `drip` (their connections close without an answer).
    func release() throws { try server.control("/test/release") }

    /// brokerd's configuration for these tests: `requestTimeout` bounds each IdP request, the shortest
    /// `interactive_timeout` bounds the device flows whose polls never get through.
    func brokerConfig(requestTimeout: Int) -> String {
        """
        allow_loopback_http = true
        request_timeout = \(requestTimeout)
        interactive_timeout = 10
        open_browser = "always"
        background_refresh = false
        """
    }
}

/// One request of a flow against a hostile case, on its own connection, and what came back.
final class HostileFlow {
    let hostileCase: String
    let client: RawClient
    private(set) var notifications: [[String: Any]] = []
    /// An answer `isUnanswered` came across.
    private var early: [String: Any]?

    /// Sends acquireTokenInteractively for client `hostile-<case>` (one flow per client at a time).
    init(_ hostileCase: String, idp: HostileIdP, daemon: Daemon, flow: String = "deviceCode") throws {
        self.hostileCase = hostileCase
        client = try RawClient(daemon.socket, receiveTimeout: 90)
        let params: [String: Any] = ["clientId": "hostile-\(hostileCase)", "scopes": ["mail.read"], "flow": flow,
                                     "authority": idp.authority(hostileCase)]
        let request: [String: Any] = ["jsonrpc": "2.0", "id": 1, "method": "acquireTokenInteractively", "params": params]
        try client.send(String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self) + "\n")
    }

    /// The next notification (deviceCode, browserUrl).
    func nextNotification() throws -> [String: Any] {
        let message = try client.readMessage()
        XCTAssertNil(message["id"], "\(hostileCase): an answer came where a notification was expected: \(message)")
        notifications.append(message)
        return message
    }

    /// The answer, past any notifications.
    func answer() throws -> [String: Any] {
        if let early { return early }
        while true {
            let message = try client.readMessage()
            if message["id"] != nil { return message }
            notifications.append(message)
        }
    }

    /// Whether the answer is still to come (looks for one without waiting long; any answer read is kept out).
    func isUnanswered() -> Bool {
        client.setTimeout(0.05)
        defer { client.setTimeout(90) }
        do {
            while true {
                let message = try client.readMessage()
                if message["id"] != nil {
                    early = message
                    return false
                }
                notifications.append(message)
            }
        } catch RawClient.Failure.timeout {
            return true
        } catch {
            return false
        }
    }
}
