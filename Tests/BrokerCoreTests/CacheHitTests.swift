import BrokerCache
@testable import BrokerCore
import BrokerJSON
import BrokerPlatform
import Foundation
import Logging
import XCTest

/// The cache hit answered on the event loop (`cachedSilentToken`) against the full silent path
/// (`acquireTokenSilently`): the same answer for every hit, and no answer (nil: the full path decides) for
/// everything that is not a plain hit.
final class CacheHitTests: XCTestCase {
    let tenant = "72f988bf-0000-0000-0000-000000000001"
    var hid: String { "uid-1.\(tenant)" }
    var authority: String { "https://login.microsoftonline.com/\(tenant)" }

    private func makeBroker(_ entries: [(CredentialKind, CacheEntity)]) async throws -> Broker {
        // Microsoft hosts go to a closed local port: instance discovery fails at once instead of leaving the machine.
        let identity = try IdPClient(settings: .init(microsoftBaseURL: "https://127.0.0.1:9"))
        addTeardownBlock { await identity.shutdown() }  // its HTTP client must be shut down before it goes
        let broker = Broker(store: CacheStore(path: "/nonexistent/cache.db", keyStore: .memory), identity: identity,
                            logger: Logger(label: "cache-hit-tests"))
        try await broker.start()
        var document = CacheDocument()
        for (kind, entity) in entries { document.entries[kind, default: [:]][entity.canonicalKey(as: kind)] = entity }
        _ = try await broker.importDocument(document)
        return broker
    }

    private func token(client: String = "client-a", target: String = "User.Read Mail.Read", secret: String = "at-1",
                       expiresIn: Int64 = 3_600, refreshOn: Int64? = nil) -> CacheEntity {
        let now = SystemClock().now()
        var entity = accessToken(hid: hid, client: client, realm: tenant, target: target, secret: secret,
                                 cachedAt: String(now), expiresOn: String(now + expiresIn))
        if let refreshOn { entity.setTimestamp("refresh_on", now + refreshOn) }
        return entity
    }

    private var baseEntries: [(CredentialKind, CacheEntity)] {
        [(.account, accountEntry(hid: hid, realm: tenant, username: "Ada@Contoso.example")),
         (.idToken, idToken(hid: hid, client: "client-a", realm: tenant, secret: "idt-1")),
         (.refreshToken, refreshToken(hid: hid, client: "client-a", secret: "rt-1"))]
    }

    private func request(_ account: AccountSelector? = nil, client: String = "client-a", scopes: [String] = ["user.read"],
                         authority: String? = nil, forceRefresh: Bool = false, claims: String? = nil) -> SilentTokenRequest {
        SilentTokenRequest(clientId: client, authority: authority ?? self.authority, scopes: scopes,
                           account: account ?? .homeAccountId(hid), forceRefresh: forceRefresh, claims: claims)
    }

    func testAHitGivesTheSameAnswerAsTheFullPath() async throws {
        let broker = try await makeBroker(baseEntries + [(.accessToken, token())])
        // The first hit on a host starts its alias lookup (as the full path does), without waiting for it.
        let cell = await broker.cell
        XCTAssertNil(cell.withLock { $0.aliasLookups[DigestHashed("login.microsoftonline.com")] })
        XCTAssertEqual(broker.cachedSilentToken(request())?.outcome.source, "cache")
        XCTAssertNotNil(cell.withLock { $0.aliasLookups[DigestHashed("login.microsoftonline.com")] })
        let full = try await broker.acquireTokenSilently(request())
        XCTAssertEqual(full.source, "cache")

        for variant in [request(), request(.username("ADA@contoso.example")), request(scopes: ["Mail.Read"]),
                        request(authority: "https://login.microsoftonline.com/organizations")] {
            let text: @Sendable (AccountSummary) -> [UInt8]? = { Array("\($0.username) \($0.apps.count)".utf8) }
            let hit = try XCTUnwrap(broker.cachedSilentToken(variant, accountText: text), "\(variant)")
            let expected = try await broker.acquireTokenSilently(variant)
            XCTAssertEqual(hit.outcome.accessToken, expected.accessToken)
            XCTAssertEqual(hit.outcome.expiresOn, expected.expiresOn)
            XCTAssertEqual(hit.outcome.extendedExpiresOn, expected.extendedExpiresOn)
            XCTAssertEqual(hit.outcome.refreshOn, expected.refreshOn)
            XCTAssertEqual(hit.outcome.tokenType, expected.tokenType)
            XCTAssertEqual(hit.outcome.grantedScopes, expected.grantedScopes)
            XCTAssertEqual(hit.outcome.idToken, expected.idToken)
            XCTAssertEqual(hit.outcome.idToken, "idt-1")
            XCTAssertEqual(hit.outcome.homeAccountId, expected.homeAccountId)
            XCTAssertEqual(hit.outcome.authority, expected.authority)
            XCTAssertEqual(hit.outcome.source, "cache")
            let summary = await broker.accountSummary(homeAccountId: hid)
            let account = try XCTUnwrap(summary)
            XCTAssertEqual(hit.username, account.username)
            XCTAssertEqual(hit.accountText, text(account), "the account's text as the front end writes it")
        }
        // Hits count as uses, for the background refresh: one per client, account, authority and scopes.
        let uses = await broker.cache.state.uses.values.map { "\($0.clientId) \($0.scopes.joined(separator: " "))" }
        XCTAssertEqual(Set(uses), ["client-a user.read", "client-a Mail.Read"])
    }

    /// Once an account's first hit has made its memos, a hit is a reader: it is answered while another reader holds
    /// the cache's lock (a mutex would make it wait for that reader), and the broker's writes still get in while
    /// hits keep coming from other threads (a waiting writer goes before readers that come after it).
    func testHitsAreReadersThatNeitherWaitForEachOtherNorKeepWritersOut() async throws {
        let broker = try await makeBroker(baseEntries + [(.accessToken, token())])
        XCTAssertNotNil(broker.cachedSilentToken(request()), "the first hit: memos made, use noted")
        let cell = await broker.cell
        let plain = request()
        let answered = DispatchSemaphore(value: 0)
        let answer = Locked<String?>(nil)
        cell.withReadLock { _ in
            Thread.detachNewThread {
                answer.withLock { $0 = broker.cachedSilentToken(plain)?.outcome.accessToken }
                answered.signal()
            }
            XCTAssertEqual(answered.wait(timeout: .now() + 30), .success, "a hit waited for another reader")
        }
        XCTAssertEqual(answer.withLock { $0 }, "at-1")

        let stop = Locked(false)
        let hits = Locked(0)
        let readersDone = DispatchGroup()
        for _ in 0..<4 {
            readersDone.enter()
            Thread.detachNewThread {
                while !stop.withLock({ $0 }) {
                    if broker.cachedSilentToken(plain) != nil { hits.withLock { $0 += 1 } }
                }
                readersDone.leave()
            }
        }
        // The readers are hitting before the first write, so that the writes below get in while they do: started
        // and left to the scheduler, on a busy 2-core machine they had not hit once when all 19 writes were done.
        let deadline = ContinuousClock.now + .seconds(30)
        while hits.withLock({ $0 }) < 4, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        XCTAssertGreaterThanOrEqual(hits.withLock { $0 }, 4, "the readers never hit")
        // Each write replaces the token the readers are hitting: every hit sees one version or the next, whole.
        for round in 2...20 {
            _ = try await broker.importDocument({
                var document = CacheDocument()
                let entity = token(secret: "at-\(round)")
                document.entries[.accessToken, default: [:]][entity.canonicalKey(as: .accessToken)] = entity
                return document
            }())
            let seen = try XCTUnwrap(broker.cachedSilentToken(request())?.outcome.accessToken)
            XCTAssertEqual(seen, "at-\(round)", "a hit after the write sees it")
        }
        stop.withLock { $0 = true }
        XCTAssertEqual(readersDone.wait(timeout: .now() + 30), .success, "a reader kept waiting")
    }

    /// A change the broker makes to an account whose summary a hit made (here an import of a second token) makes
    /// the summary and the text again as the change is done: the next hit reads them, as the hits before it did.
    func testAChangeMakesTheAccountsTextAgainForTheNextHit() async throws {
        let broker = try await makeBroker(baseEntries + [(.accessToken, token())])
        let text: @Sendable (AccountSummary) -> [UInt8]? = { summary in
            Array(summary.apps.flatMap(\.accessTokens).map { $0.scopes.joined(separator: "+") }.sorted().joined(separator: ",").utf8)
        }
        let first = try XCTUnwrap(broker.cachedSilentToken(request(), accountText: text))
        XCTAssertEqual(first.accountText.map { String(decoding: $0, as: UTF8.self) }, "User.Read+Mail.Read")
        let cell = await broker.cell
        func kept() -> String? {
            cell.withReadLock { $0.cache.keptAccountText(homeAccountId: hid, withText: true) }?.text
                .map { String(decoding: $0, as: UTF8.self) }
        }
        XCTAssertEqual(kept(), "User.Read+Mail.Read")
        var document = CacheDocument()
        let files = token(target: "Files.Read", secret: "at-2")
        document.entries[.accessToken, default: [:]][files.canonicalKey(as: .accessToken)] = files
        _ = try await broker.importDocument(document)
        XCTAssertEqual(kept(), "Files.Read,User.Read+Mail.Read", "made again when the import was done, before any hit")
        let next = try XCTUnwrap(broker.cachedSilentToken(request(scopes: ["Files.Read"]), accountText: text))
        XCTAssertEqual(next.accountText.map { String(decoding: $0, as: UTF8.self) }, "Files.Read,User.Read+Mail.Read")
    }

    func testEverythingButAPlainHitIsLeftToTheFullPath() async throws {
        let broker = try await makeBroker(baseEntries + [
            (.accessToken, token()),
            (.accessToken, token(target: "Files.Read", secret: "at-expiring", expiresIn: 120)),
            (.accessToken, token(target: "Calendars.Read", secret: "at-aging", refreshOn: -10)),
            (.accessToken, token(client: "client-b", target: "Notes.Read", secret: "at-b")),
        ])
        _ = try await broker.acquireTokenSilently(request())
        XCTAssertNotNil(broker.cachedSilentToken(request()))

        let misses: [(String, SilentTokenRequest)] = [
            ("forceRefresh", request(forceRefresh: true)),
            ("claims", request(claims: #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#)),
            ("inside the 5-minute buffer", request(scopes: ["Files.Read"])),
            ("past refresh_on", request(scopes: ["Calendars.Read"])),
            ("another client's token", request(scopes: ["Notes.Read"])),
            ("a scope no token has", request(scopes: ["Sites.Read"])),
            ("an unknown account", request(.homeAccountId("nobody.\(tenant)"))),
            ("no scopes", request(scopes: [])),
            ("an invalid authority", request(authority: "not a url")),
            ("a tenant named by its domain", request(authority: "https://login.microsoftonline.com/contoso.example")),
        ]
        for (why, miss) in misses { XCTAssertNil(broker.cachedSilentToken(miss), why) }

        _ = try await broker.removeAccount(.homeAccountId(hid), forClient: "client-a")
        XCTAssertNil(broker.cachedSilentToken(request()), "an account removed from the app")
        do {
            _ = try await broker.acquireTokenSilently(request())
            XCTFail("the full path must refuse it too")
        } catch {
            guard case .interactionRequired = error else { return XCTFail("\(error)") }
        }
    }
}
