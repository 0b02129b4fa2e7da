import BrokerCache
@testable import BrokerCore
import Foundation
import XCTest

/// What the network told brokerd (NetworkMemory): kept in the cache database across a restart, never exported, and
/// read by the silent path (a tenant name resolved without discovery).
final class NetworkMemoryTests: XCTestCase {
    func testFactsSurviveARestartAndStayOutOfTheExport() async throws {
        let dir = try makeTemporaryDirectory(self)
        let keyStore = KeyStore.file(path: "\(dir)/cache.key"), path = "\(dir)/cache.db"
        let store = CacheStore(path: path, keyStore: keyStore)
        var cache = try await store.load().cache
        XCTAssertTrue(cache.learn(.tenant, NetworkMemory.tenantSubject(environment: "Login.Example", tenant: "Contoso.Example"),
                                  value: "11111111-1111-1111-1111-111111111111", at: 1_000))
        XCTAssertTrue(cache.learn(.discovery, "https://login.example/contoso.example/v2.0", value: #"{"issuer":"x"}"#, at: 1_000))
        XCTAssertTrue(cache.learn(.aliases, "login.example", value: NetworkMemory.aliasValue([["login.example", "sts.example"]]),
                                  at: 1_000))
        XCTAssertFalse(cache.learn(.tenant, "login.example/contoso.example", value: "11111111-1111-1111-1111-111111111111", at: 1_030),
                       "the same fact within a minute is no change")
        XCTAssertTrue(cache.aliases.canonical("sts.example") == cache.aliases.canonical("login.example"), "aliases apply at once")
        try await store.write(cache.takeChangedRows().map(cache.value(of:)))
        await store.close()

        let reloaded = try await CacheStore(path: path, keyStore: keyStore).load().cache
        XCTAssertEqual(reloaded.learned, cache.learned)
        XCTAssertEqual(reloaded.learned.tenantId(environment: "LOGIN.example", tenant: "contoso.EXAMPLE"),
                       "11111111-1111-1111-1111-111111111111", "names compare ignoring case")
        XCTAssertNil(reloaded.learned.tenantId(environment: "login.example", tenant: "fabrikam.example"))
        XCTAssertEqual(reloaded.learned.fact(.discovery, "https://login.example/contoso.example/v2.0")?.learnedAt, 1_000)
        XCTAssertTrue(reloaded.aliases.canonical("sts.example") == reloaded.aliases.canonical("login.example"),
                      "learned aliases apply after a restart")
        XCTAssertFalse(String(decoding: reloaded.exported(), as: UTF8.self).contains("contoso.example"), "never exported")
    }

    func testFreshness() {
        let fact = NetworkMemory.Fact(value: "v", learnedAt: 1_000)
        XCTAssertTrue(fact.isFresh(now: 1_000, lifetime: 60))
        XCTAssertTrue(fact.isFresh(now: 1_059, lifetime: 60))
        XCTAssertFalse(fact.isFresh(now: 1_060, lifetime: 60))
        XCTAssertFalse(fact.isFresh(now: 999, lifetime: 60), "learned in the future (a clock step back): asked again")
        XCTAssertNil(NetworkMemory.parse(key: "nonsense"))
        XCTAssertEqual(NetworkMemory.parse(key: NetworkMemory.key(.tenant, "a b"))?.subject, "a b")
        XCTAssertEqual(NetworkMemory.aliasGroups(of: .init(value: NetworkMemory.aliasValue([["a", "b"], []]), learnedAt: 0)), [["a", "b"]])
    }

    /// The silent plan files a tenant named by its domain under the tenant id learned for it, without discovery.
    func testATenantNameResolvesThroughWhatWasLearned() throws {
        var cache = TokenCache()
        cache.add(.account, accountEntry(hid: "uid.11111111-1111-1111-1111-111111111111", realm: "11111111-1111-1111-1111-111111111111",
                                         username: "user@contoso.example"))
        let request = SilentTokenRequest(clientId: "client", authority: "https://login.microsoftonline.com/contoso.example",
                                         scopes: ["User.Read"], account: .username("user@contoso.example"))
        let authority = try XCTUnwrap(Authority("https://login.microsoftonline.com/contoso.example"))
        XCTAssertTrue(try Broker.plan(request, authority: authority, cache: cache).needsTenantDiscovery)
        cache.learn(.tenant, NetworkMemory.tenantSubject(environment: "login.microsoftonline.com", tenant: "contoso.example"),
                    value: "11111111-1111-1111-1111-111111111111", at: 1_000)
        let plan = try Broker.plan(request, authority: authority, cache: cache)
        XCTAssertFalse(plan.needsTenantDiscovery)
        XCTAssertEqual(plan.authority.tenant, "11111111-1111-1111-1111-111111111111")
    }
}
