import BrokerProtocol
import Foundation
import XCTest

/// Once start-up is over, brokerd unmaps the code and read-only data that start-up mapped (StartupPages). The
/// daemon must then run everything as before: each request maps back what it needs from the page cache.
final class StartupPagesTests: XCTestCase {
    /// The figure after `key=` in the log line that says the pages were released.
    private func kib(_ key: String, in log: String) throws -> Int {
        let line = try XCTUnwrap(log.split(separator: "\n").first { $0.contains("released the start-up pages") }, log)
        let field = try XCTUnwrap(line.split(separator: " ").first { $0.hasPrefix(key + "=") }, String(line))
        return try XCTUnwrap(Int(field.dropFirst(key.count + 1)), String(line))
    }

    func testTheDaemonReleasesItsStartUpPagesAndServesOn() throws {
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        waitFor("the start-up pages released") { daemon.log.contains("released the start-up pages") }
        let before = try kib("rss_before_kib", in: daemon.log), after = try kib("rss_after_kib", in: daemon.log)
        XCTAssertLessThan(after, before, daemon.log)
        XCTAssertGreaterThan(try kib("mappings", in: daemon.log), 0, daemon.log)

        // After the release: an interactive sign-in, a cache hit, a refresh and the status, as from a fresh start.
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let signedIn = try decode(TokenResult.self, login.stdout)
        let hit = try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(hit.status, 0, hit.stderr + daemon.log)
        let cached = try decode(TokenResult.self, hit.stdout)
        XCTAssertEqual(cached.source, "cache")
        XCTAssertTrue(cached.accessToken == signedIn.accessToken, "the cache hit is not the signed-in token")
        let refreshed = try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--force-refresh", "--json"])
        XCTAssertEqual(refreshed.status, 0, refreshed.stderr + daemon.log)
        XCTAssertTrue(try decode(TokenResult.self, refreshed.stdout).accessToken != signedIn.accessToken, "not refreshed")
        XCTAssertEqual(try daemon.ctl(["status"]).status, 0)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }
}
