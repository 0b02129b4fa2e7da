import BrokerConfig
import Foundation
import XCTest

/// The connection and request limits in the configuration file: defaults, values, ranges, and the shipped example.
final class LimitConfigTests: XCTestCase {
    func testDefaults() {
        let defaults = BrokerConfiguration()
        XCTAssertEqual(defaults.maxConnections, 256)
        XCTAssertEqual(defaults.maxConnectionsPerProcess, 64)
        XCTAssertEqual(defaults.maxRequestsInFlight, 64)
        XCTAssertEqual(defaults.maxBatchSize, 100)
        XCTAssertEqual(defaults.lineTimeoutSeconds, 10)
    }

    func testValuesAreRead() throws {
        let config = try BrokerConfiguration.parse("""
            max_connections_per_process = 8
            max_requests_in_flight = 2
            max_batch_size = 5
            line_timeout = 1
            """)
        XCTAssertEqual(config.maxConnectionsPerProcess, 8)
        XCTAssertEqual(config.maxRequestsInFlight, 2)
        XCTAssertEqual(config.maxBatchSize, 5)
        XCTAssertEqual(config.lineTimeoutSeconds, 1)
    }

    func testOutOfRangeValuesAreRefusedWithTheirLine() {
        func message(_ text: String) -> String? {
            do { _ = try BrokerConfiguration.parse(text) } catch { return "\(error.line): \(error.message)" }
            return nil
        }
        XCTAssertEqual(message("max_connections_per_process = 0"), "1: 'max_connections_per_process' must be an integer in 1...100000")
        XCTAssertEqual(message("\nmax_requests_in_flight = 0"), "2: 'max_requests_in_flight' must be an integer in 1...10000")
        XCTAssertEqual(message("max_batch_size = 10001"), "1: 'max_batch_size' must be an integer in 1...10000")
        XCTAssertEqual(message("line_timeout = 0"), "1: 'line_timeout' must be an integer in 1...3600")
        XCTAssertEqual(message("line_timeout = \"10\""), "1: 'line_timeout' must be an integer in 1...3600")
    }

    /// packaging/config.toml.example says it shows every default: its limits must be the real ones.
    func testTheShippedExampleShowsTheDefaults() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("packaging/config.toml.example"), encoding: .utf8)
        let example = try BrokerConfiguration.parse(text)
        let defaults = BrokerConfiguration()
        XCTAssertEqual(example.maxConnections, defaults.maxConnections)
        XCTAssertEqual(example.maxConnectionsPerProcess, defaults.maxConnectionsPerProcess)
        XCTAssertEqual(example.idleTimeoutSeconds, defaults.idleTimeoutSeconds)
        XCTAssertEqual(example.lineTimeoutSeconds, defaults.lineTimeoutSeconds)
        XCTAssertEqual(example.maxRequestsInFlight, defaults.maxRequestsInFlight)
        XCTAssertEqual(example.maxBatchSize, defaults.maxBatchSize)
        XCTAssertEqual(example.sandboxedApps, defaults.sandboxedApps)
        XCTAssertEqual(example.unsandboxedApps, defaults.unsandboxedApps)
        XCTAssertEqual(example.consentTimeoutSeconds, defaults.consentTimeoutSeconds)
        XCTAssertEqual(example.auditRetentionDays, defaults.auditRetentionDays)
        XCTAssertEqual(example.auditMaxRows, defaults.auditMaxRows)
        XCTAssertTrue(example.pins.isEmpty, "the example's pin is commented out")
    }
}
