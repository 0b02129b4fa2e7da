import BrokerCache
@testable import BrokerCore
import BrokerJSON
import Logging
import XCTest

/// A broker opened but not yet loaded (`Broker.open`, as brokerd starts): cache hits are answered from the accounts
/// read one at a time, with the answer the whole cache gives; everything else waits for `finishLoading`.
final class PartialLoadTests: XCTestCase {
    let tenant = "72f988bf-0000-0000-0000-000000000001"
    var authority: String { "https://login.microsoftonline.com/\(tenant)" }
    func hid(_ n: Int) -> String { "uid-\(n).\(tenant)" }

    private func identity() throws -> IdPClient {
        // Microsoft hosts go to a closed local port: instance discovery fails at once instead of leaving the machine.
        let identity = try IdPClient(settings: .init(microsoftBaseURL: "https://127.0.0.1:9"))
        addTeardownBlock { await identity.shutdown() }
        return identity
    }

    private func broker(_ dir: String) throws -> Broker {
        Broker(store: CacheStore(path: "\(dir)/cache.db", keyStore: .file(path: "\(dir)/cache.key")),
               identity: try identity(), logger: Logger(label: "partial-load-tests"))
    }

    /// Three accounts, each with a token for client-a and client-b (a family app), stored and closed; account 2 is
    /// then removed from client-b (brokerd's state row).
    private func storedCache() async throws -> String {
        let dir = try makeTemporaryDirectory(self)
        let writer = try broker(dir)
        try await writer.start()
        let now = SystemClock().now()
        var document = CacheDocument()
        func put(_ kind: CredentialKind, _ entity: CacheEntity) {
            document.entries[kind, default: [:]][entity.canonicalKey(as: kind)] = entity
        }
        for n in 1...3 {
            put(.account, accountEntry(hid: hid(n), realm: tenant, username: "user\(n)@contoso.example"))
            for client in ["client-a", "client-b"] {
                put(.accessToken, accessToken(hid: hid(n), client: client, realm: tenant, target: "User.Read",
                                              secret: "at-\(n)-\(client)", cachedAt: String(now), expiresOn: String(now + 3_600)))
                put(.idToken, idToken(hid: hid(n), client: client, realm: tenant, secret: "idt-\(n)-\(client)"))
                put(.refreshToken, refreshToken(hid: hid(n), client: client, secret: "rt-\(n)-\(client)", familyId: "1"))
            }
        }
        put(.appMetadata, makeEntity(["client_id": "client-b", "environment": "login.microsoftonline.com", "family_id": "1"]))
        _ = try await writer.importDocument(document)
        _ = try await writer.removeAccount(.homeAccountId(hid(2)), forClient: "client-b")
        await writer.flush()
        return dir
    }

    private func accounts(_ broker: Broker) async -> Int { await broker.cache.homeAccountCount }

    private func request(_ account: AccountSelector, client: String = "client-a") -> SilentTokenRequest {
        SilentTokenRequest(clientId: client, authority: authority, scopes: ["User.Read"], account: account)
    }

    func testAHitBeforeTheLoadReadsOnlyItsAccountAndGivesTheFullAnswer() async throws {
        let dir = try await storedCache()
        let broker = try broker(dir)
        try await broker.open()
        let count0 = await accounts(broker)
        XCTAssertEqual(count0, 0, "nothing of an account is read at open")

        // The account as a front end would write it: all of the summary, so that texts compare summaries.
        let describe: @Sendable (AccountSummary) -> [UInt8]? = { Array(String(describing: $0).utf8) }
        var early = try XCTUnwrap(broker.cachedSilentToken(request(.homeAccountId(hid(1)), client: "client-b"),
                                                           accountText: describe))
        XCTAssertTrue(early.outcome.accessToken == "at-1-client-b")
        let count1 = await accounts(broker)
        XCTAssertEqual(count1, 1, "one account read")
        let uppercase = try XCTUnwrap(broker.cachedSilentToken(request(.either(hid(3).uppercased()))))
        XCTAssertTrue(uppercase.outcome.accessToken == "at-3-client-a")
        let count2 = await accounts(broker)
        XCTAssertEqual(count2, 2)

        XCTAssertNil(broker.cachedSilentToken(request(.username("user1@contoso.example"))),
                     "a username could name an account not read yet: left to the full path")
        XCTAssertNil(broker.cachedSilentToken(request(.homeAccountId("nobody.\(tenant)"))))
        XCTAssertNil(broker.cachedSilentToken(request(.homeAccountId(hid(2)), client: "client-b")), "removed from client-b")
        let second = try XCTUnwrap(broker.cachedSilentToken(request(.homeAccountId(hid(2))), accountText: describe))

        try await broker.finishLoading()
        let count3 = await accounts(broker)
        XCTAssertEqual(count3, 3)
        XCTAssertFalse(broker.isStillFresh(&early.freshness), "an answer made from the partial cache is made again")
        let full = try XCTUnwrap(broker.cachedSilentToken(request(.homeAccountId(hid(1)), client: "client-b"),
                                                          accountText: describe))
        XCTAssertTrue(full.outcome.accessToken == early.outcome.accessToken)
        XCTAssertEqual(full.outcome.idToken, early.outcome.idToken)
        XCTAssertEqual(full.outcome.expiresOn, early.outcome.expiresOn)
        XCTAssertEqual(full.outcome.grantedScopes, early.outcome.grantedScopes)
        XCTAssertEqual(full.accountText, early.accountText, "the account as the partial cache gave it")
        let firstSummary = await broker.accountSummary(homeAccountId: hid(1))
        let first = try XCTUnwrap(firstSummary)
        XCTAssertEqual(early.accountText, describe(first))
        XCTAssertEqual(first.apps.first { $0.clientId == "client-b" }?.familyId, "1", "app metadata is read at open")
        let secondSummary = await broker.accountSummary(homeAccountId: hid(2))
        let secondAccount = try XCTUnwrap(secondSummary)
        XCTAssertEqual(second.accountText, describe(secondAccount))
        XCTAssertEqual(secondAccount.hiddenFrom, ["client-b"], "brokerd's state is read at open")
        XCTAssertNotNil(broker.cachedSilentToken(request(.username("user1@contoso.example"))))
        XCTAssertNil(broker.cachedSilentToken(request(.homeAccountId(hid(2)), client: "client-b")))
    }

    func testUsesNotedBeforeTheLoadAreKept() async throws {
        let dir = try await storedCache()
        let broker = try broker(dir)
        try await broker.open()
        XCTAssertNotNil(broker.cachedSilentToken(request(.homeAccountId(hid(3)))))
        try await broker.finishLoading()
        let uses = await broker.cache.state.uses.values.map { "\($0.homeAccountId) \($0.clientId)" }
        XCTAssertEqual(uses, ["\(hid(3)) client-a"])
        let cell = await broker.cell
        XCTAssertTrue(cell.withLock { $0.cache.hasChangedRows }, "the use is written with the next write")
    }

    func testEverythingElseWaitsForTheLoad() async throws {
        let dir = try await storedCache()
        let broker = try broker(dir)
        try await broker.open()
        let waiter = Task { () -> Int in
            await broker.loaded()
            return await broker.status().accounts
        }
        for _ in 0..<200 { await Task.yield() }
        let finished = Task { try await broker.finishLoading() }
        let accounts = await waiter.value
        try await finished.value
        XCTAssertEqual(accounts, 3, "loaded() returned before the whole cache was there")
        await broker.loaded()  // after the load: at once
    }

    func testABrokerStartedWholeNeedsNoLoad() async throws {
        let dir = try await storedCache()
        let broker = try broker(dir)
        try await broker.start()
        await broker.loaded()
        let count3 = await accounts(broker)
        XCTAssertEqual(count3, 3)
        let cell = await broker.cell
        XCTAssertNil(cell.withLock { $0.partial }, "no partial cache is kept")
    }
}
