import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// Wall-clock steps, as a suspend makes them (the wall clock jumps forwards while nothing ran) and as an NTP
/// correction or a clock set by hand makes them (either way). brokerd and the test IdP run with
/// Tests/clock/wallclock_step.c preloaded, which adds the seconds in one file to their wall clocks: the test rewrites
/// it, and both wall clocks step together, as the machine's and the IdP's do across a suspend. Monotonic clocks and
/// timers are left alone, as a real step leaves them.
final class ClockStepTests: XCTestCase {
    private let directory = TemporaryDirectory("brokerd-clock")
    private var stepFile: String { directory.path + "/step" }
    private var stepped: [String: String] = [:]

    override func setUpWithError() throws {
        let library = directory.path + "/wallclock_step.so"
        let compiler = ["/usr/bin/cc", "/opt/swift/usr/bin/clang"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let compiler else { throw missing("no C compiler for Tests/clock/wallclock_step.c") }
        let built = try runCommand(compiler, ["-shared", "-fPIC", "-O2", "-o", library, TestIdP.root + "/Tests/clock/wallclock_step.c", "-ldl"])
        XCTAssertEqual(built.status, 0, built.stderr)
        try step(0)
        stepped = ["LD_PRELOAD": library, "WALLCLOCK_STEP_FILE": stepFile]
    }

    /// Sets both wall clocks to the real time plus `seconds`.
    private func step(_ seconds: Int) throws {
        try "\(seconds)\n".write(toFile: stepFile, atomically: true, encoding: .utf8)
    }

    private static let minute = 60, hour = 3600, day = 86_400


    /// An IdP issuing one-hour access tokens and a brokerd checking five times a second, both on the stepped clock, with
    /// alice signed in to the "mail" profile.
    private func signedIn(_ config: String = "") throws -> (TestIdP, Daemon, TokenResult) {
        let idp = try TestIdP(environment: stepped.merging(["ACCESS_TOKEN_EXPIRE_SECONDS": "3600"]) { $1 })
        let daemon = try Daemon(config: "refresh_check_interval = 0.2\n\(config)\n\(idp.brokerConfig())")
        daemon.environment = idp.browserEnvironment().merging(stepped) { $1 }
        try daemon.start()
        let login = try daemon.ctl(["login", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        return (idp, daemon, try decode(TokenResult.self, login.stdout))
    }

    private func token(_ daemon: Daemon) throws -> TokenResult {
        let result = try daemon.ctl(["token", "mail", "--config", daemon.configPath, "--json"])
        XCTAssertEqual(result.status, 0, result.stderr + daemon.log)
        return try decode(TokenResult.self, result.stdout)
    }

    func testAfterAForwardStepTheNextRequestRenewsTheExpiredToken() throws {
        let (idp, daemon, first) = try signedIn("background_refresh = false")
        XCTAssertEqual(try token(daemon).accessToken, first.accessToken, "before the step: from the cache")

        try step(2 * Self.hour)  // a two-hour suspend: the token expired while the machine slept
        let after = try token(daemon)
        XCTAssertNotEqual(after.accessToken, first.accessToken, "an expired token is never served after the step")
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 1)
        XCTAssertGreaterThan(after.expiresOn, first.expiresOn + 7000, "the new token's lifetime counts from the new time")
        XCTAssertEqual(try token(daemon).accessToken, after.accessToken, "the renewed token is then served from the cache")
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 1)
    }

    func testAfterAForwardStepTheBackgroundRefreshRenewsAtItsNextCheck() throws {
        let (idp, daemon, first) = try signedIn()
        XCTAssertEqual(try token(daemon).source, "cache")
        waitForRefreshChecks(daemon, count: 2)  // nothing is due an hour ahead of expiry
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 0)

        try step(2 * Self.hour)
        try waitFor("the background refresh after the step") { try idp.tokenRequests("refresh_token") >= 1 }
        let renewed = try token(daemon)
        XCTAssertEqual(renewed.source, "cache", "the app finds the renewed token waiting for it")
        XCTAssertNotEqual(renewed.accessToken, first.accessToken)
        waitForRefreshChecks(daemon, count: 2)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 1, "renewed once, not at every check")
    }

    func testABackwardStepNeitherRenewsEarlyNorStopsTheChecks() throws {
        let (idp, daemon, first) = try signedIn()
        try step(-3 * Self.hour)
        let after = try token(daemon)
        XCTAssertEqual(after.accessToken, first.accessToken, "a token valid before a backward step is still valid")
        XCTAssertEqual(after.source, "cache")
        waitForRefreshChecks(daemon, count: 3)
        XCTAssertEqual(try idp.tokenRequests("refresh_token"), 0, "nothing is due by the new wall clock")

        // 55 minutes after the sign-in by the real clock: the token is inside renew_ahead (10 minutes), and the
        // checks, which kept running through the step back, renew it.
        try step(55 * Self.minute)
        try waitFor("the background refresh once the token is due") { try idp.tokenRequests("refresh_token") >= 1 }
        XCTAssertNotEqual(try token(daemon).accessToken, first.accessToken)
    }

    func testARetryIsNotPostponedByABackwardStep() throws {
        let (idp, daemon, _) = try signedIn("refresh_backoff = 2")
        // A day later the token has long expired. The IdP answers 503 to the next four refresh requests: the app's
        // own request (and brokerd's one retry of it) fails, and so does the background refresh's first pass.
        try idp.control("/test/fail-next?status=503&count=4&grant_type=refresh_token")
        try step(Self.day)
        XCTAssertNotEqual(try daemon.ctl(["token", "mail", "--config", daemon.configPath]).status, 0)
        try waitFor("a failed background refresh") { try idp.tokenRequests("refresh_token") >= 4 }
        XCTAssertTrue(daemon.log.contains("background refresh failed; backing off"), daemon.log)

        // Then the wall clock steps back 22 hours while the retry waits (1–3 s). A retry time kept on the wall clock
        // would now be 22 hours away; the token is still expired, and the retry comes after the backoff.
        try step(2 * Self.hour)
        try waitFor("the retry after the backoff") { try idp.tokenRequests("refresh_token") >= 5 }
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.signInRequired, [])
        XCTAssertEqual(try token(daemon).source, "cache", "the retried renewal left a fresh token in the cache")
    }
}
