import BrokerCache
@testable import BrokerCore
import BrokerPlatform
import Logging
import XCTest

/// The broker on a clock the test moves by hand (`ManualClock`): what depends on time is shown by moving the clock,
/// and that something did not happen by the state the code waits in, never by sleeping.
final class ManualClockTests: XCTestCase {
    let tenant = "72f988bf-0000-0000-0000-000000000001"
    var hid: String { "uid-1.\(tenant)" }

    private func makeBroker(clock: ManualClock, logger: Logger = Logger(label: "manual-clock-tests")) async throws -> Broker {
        let identity = try IdPClient(settings: .init(microsoftBaseURL: "https://127.0.0.1:9"), clock: clock)
        addTeardownBlock { await identity.shutdown() }
        let broker = Broker(store: CacheStore(path: "/nonexistent/cache.db", keyStore: .memory), identity: identity,
                            clock: clock, logger: logger)
        try await broker.start()
        let now = clock.now()
        var document = CacheDocument()
        for (kind, entity) in [
            (CredentialKind.account, accountEntry(hid: hid, realm: tenant, username: "ada@contoso.example")),
            (.idToken, idToken(hid: hid, client: "client-a", realm: tenant, secret: "idt-1")),
            (.refreshToken, refreshToken(hid: hid, client: "client-a", secret: "rt-1")),
            (.accessToken, accessToken(hid: hid, client: "client-a", realm: tenant, target: "User.Read", secret: "at-1",
                                       cachedAt: String(now), expiresOn: String(now + 400))),
        ] { document.entries[kind, default: [:]][entity.canonicalKey(as: kind)] = entity }
        _ = try await broker.importDocument(document)
        return broker
    }

    private var request: SilentTokenRequest {
        SilentTokenRequest(clientId: "client-a", authority: "https://login.microsoftonline.com/\(tenant)", scopes: ["user.read"],
                           account: .homeAccountId(hid))
    }

    /// A token with 400 s left is a hit; 150 s later it is inside the 5-minute buffer, and neither the hit path nor a
    /// remembered answer gives it any more.
    func testAHitEndsWhenTheClockReachesTheExpiryBuffer() async throws {
        let clock = ManualClock(now: 1_800_000_000)
        let broker = try await makeBroker(clock: clock)
        var hit = try XCTUnwrap(broker.cachedSilentToken(request), "400 s left: a hit")
        XCTAssertEqual(hit.outcome.accessToken, "at-1")
        XCTAssertTrue(broker.isStillFresh(&hit.freshness))
        clock.advance(by: 99)
        XCTAssertNotNil(broker.cachedSilentToken(request), "301 s left: still outside the buffer")
        XCTAssertTrue(broker.isStillFresh(&hit.freshness))
        clock.stepWallClock(by: 51)
        XCTAssertNil(broker.cachedSilentToken(request), "250 s left: the full path renews it")
        XCTAssertFalse(broker.isStillFresh(&hit.freshness), "the remembered answer ends with it")
    }

    /// The background refresh checks once, then waits on the clock: nothing runs until the interval has passed on
    /// it, and the next check comes as soon as it has.
    /// A hit notes its use for the background refresh, then leaves it for `hitUseResolution` seconds (so that it
    /// needs only a reader's lock), and notes it again once that has passed.
    func testAHitNotesItsUseOnceAMinute() async throws {
        let clock = ManualClock(now: 1_800_000_000)
        let broker = try await makeBroker(clock: clock)
        func lastUsed() async -> Int64? { await broker.cache.state.uses.values.first?.lastUsed }
        let imported = await lastUsed()
        XCTAssertNil(imported, "imported, never asked for")
        XCTAssertNotNil(broker.cachedSilentToken(request))
        let first = await lastUsed()
        XCTAssertEqual(first, 1_800_000_000, "the first hit notes its use")
        clock.advance(by: TokenCache.hitUseResolution - 1)
        XCTAssertNotNil(broker.cachedSilentToken(request))
        let within = await lastUsed()
        XCTAssertEqual(within, 1_800_000_000, "within the resolution: left as it is")
        clock.advance(by: 1)
        XCTAssertNotNil(broker.cachedSilentToken(request))
        let later = await lastUsed()
        XCTAssertEqual(later, 1_800_000_000 + TokenCache.hitUseResolution, "a minute on: noted again")
    }

    func testTheBackgroundRefreshChecksWhenTheClockSaysSo() async throws {
        let clock = ManualClock(now: 1_800_000_000)
        let lines = Locked([String]())
        var logger = Logger(label: "manual-clock-tests") { _ in CapturingLogHandler(lines: lines) }
        logger.logLevel = .debug
        let broker = try await makeBroker(clock: clock, logger: logger)
        func checks() -> Int { lines.withLock { $0.filter { $0.hasPrefix("background refresh check done") }.count } }
        let loop = Task { await broker.runBackgroundRefresh(BackgroundRefreshSettings(checkInterval: .seconds(60))) }
        defer { loop.cancel() }

        try await until("the first check, then its wait") { checks() == 1 && clock.sleepers == 1 }
        clock.advance(by: 59)
        // The one waiting sleep has not ended, so the loop cannot have moved: it is still the first check's wait.
        XCTAssertEqual(clock.sleepers, 1)
        XCTAssertEqual(checks(), 1)
        clock.advance(by: 1)
        try await until("the second check") { checks() == 2 && clock.sleepers == 1 }
        loop.cancel()
        try await until("the loop's wait cancelled") { clock.sleepers == 0 }
    }

    /// A wait of a fraction of a second (a test's `refresh_check_interval = 0.2`) ends at the clock's next second.
    func testAFractionOfASecondEndsAtTheNextSecond() async throws {
        let clock = ManualClock(now: 1_800_000_000)
        let ended = Locked(false)
        let wait = Task {
            try await clock.sleep(for: .milliseconds(250))
            ended.withLock { $0 = true }
        }
        try await until("the wait") { clock.sleepers == 1 }
        XCTAssertFalse(ended.withLock { $0 })
        clock.advance(by: 1)
        try await wait.value
        XCTAssertTrue(ended.withLock { $0 })
    }

    /// Waits for a state the code under test reaches by itself (it runs on other tasks); fails after 10 s.
    private func until(_ what: String, _ condition: () -> Bool) async throws {
        for _ in 0..<10_000 {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(1))
        }
        XCTFail("never reached: \(what)")
    }
}

/// Keeps what is logged, to wait on.
private struct CapturingLogHandler: LogHandler {
    let lines: Locked<[String]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.withLock { $0.append("\(event.message)") }
    }
}
