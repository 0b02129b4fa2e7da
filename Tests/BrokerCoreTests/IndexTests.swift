import Foundation
import BrokerCache
import BrokerCore
import BrokerJSON
import XCTest

/// `TokenCache.find` through its indexes: every field, alias groups, scope supersets, and no stale hits.
final class IndexTests: XCTestCase {
    private func sampleCache() -> TokenCache {
        var cache = TokenCache()
        cache.put(.accessToken, key: "at-1", accessToken(hid: "Uid1.Utid", env: "login.windows.net", client: "client-a",
                                                        realm: "Tenant-A", target: "User.Read Mail.Read openid",
                                                        secret: "fake-at-1"))
        cache.put(.accessToken, key: "at-2", accessToken(hid: "uid1.utid", env: "login.microsoftonline.com", client: "client-b",
                                                        realm: "tenant-a", target: "User.Read", secret: "fake-at-2"))
        cache.put(.accessToken, key: "at-3", accessToken(hid: "uid2.utid", env: "login.microsoftonline.us", client: "client-a",
                                                        realm: "tenant-b", target: "Files.Read", secret: "fake-at-3"))
        cache.put(.refreshToken, key: "rt-1", refreshToken(hid: "uid1.utid", env: "login.windows.net", client: "client-a",
                                                          secret: "fake-frt-1", familyId: "1"))
        cache.put(.refreshToken, key: "rt-2", refreshToken(hid: "uid1.utid", client: "client-b", secret: "fake-rt-2"))
        cache.put(.refreshToken, key: "rt-3", refreshToken(hid: "uid2.utid", client: "client-c", secret: "fake-frt-3",
                                                          familyId: "2"))
        return cache
    }

    func testByHomeAccountCaseInsensitively() {
        let cache = sampleCache()
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid1.utid")), ["at-1", "at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "UID1.UTID")), ["at-1", "at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid2.utid")), ["at-3"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid3.utid")), [])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(homeAccountId: "Uid1.Utid")), ["rt-1", "rt-2"])
    }

    func testFieldsCompareAsLowercasedCopiesWould() {
        let pairs = [("", ""), ("a", "A"), ("User.Read", "user.read"), ("abc", "abd"), ("abc", "ab"), ("ab", "abc"),
                     ("Straße", "STRASSE"), ("ÄBC", "äbc"), ("İ", "i̇"), ("K", "\u{212A}"), ("ß", "ss"), ("x\u{0}", "X\u{0}"),
                     ("[", "{"), ("@", "`")]
        for (a, b) in pairs {
            XCTAssertEqual(TokenCache.equalIgnoringCase(a, b), a.lowercased() == b.lowercased(), "\(a) / \(b)")
            XCTAssertEqual(TokenCache.equalIgnoringCase(b, a), a.lowercased() == b.lowercased(), "\(b) / \(a)")
        }
    }

    func testByEnvironmentAliasGroup() {
        let cache = sampleCache()
        // An entry written as login.windows.net is found with login.microsoftonline.com, and the reverse.
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(environment: "login.microsoftonline.com")), ["at-1", "at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(environment: "login.windows.net")), ["at-1", "at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(environment: "Sts.Windows.Net")), ["at-1", "at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(environment: "login.usgovcloudapi.net")), ["at-3"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(environment: "login.microsoftonline.de")), [])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(homeAccountId: "uid1.utid", environment: "login.microsoftonline.com",
                                                            clientId: "client-a")), ["rt-1"])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(environment: "login.windows.net", clientId: "client-b")), ["rt-2"])
    }

    func testUnknownHostsAndLearnedAliases() {
        var aliases = EnvironmentAliases()
        aliases.add(["login.contoso.example", "sts.contoso.example"])
        XCTAssertEqual(aliases.canonical("STS.contoso.example"), aliases.canonical("login.contoso.example"))
        XCTAssertEqual(aliases.aliases(of: "sts.contoso.example"), ["login.contoso.example", "sts.contoso.example"])
        XCTAssertEqual(aliases.aliases(of: "login.windows.net"),
                       ["login.microsoft.com", "login.microsoftonline.com", "login.windows.net", "sts.windows.net"])
        XCTAssertEqual(aliases.aliases(of: "Other.Example"), ["other.example"])
        XCTAssertNotEqual(aliases.canonical("login.microsoftonline.us"), aliases.canonical("login.microsoftonline.com"))
        // A group naming a known host joins that host's group.
        aliases.add(["login.windows-ppe.example", "login.windows.net"])
        XCTAssertEqual(aliases.canonical("login.windows-ppe.example"), aliases.canonical("login.microsoftonline.com"))

        var cache = TokenCache(aliases: aliases)
        cache.put(.accessToken, key: "k", accessToken(hid: "h", env: "sts.contoso.example", client: "c", realm: "r",
                                                     target: "s", secret: "fake-at-1"))
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(environment: "login.contoso.example")), ["k"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(environment: "login.example")), [])
    }

    func testByClientFamilyAndRealm() {
        let cache = sampleCache()
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(clientId: "CLIENT-A")), ["at-1", "at-3"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(clientId: "client-b")), ["at-2"])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(familyId: "1")), ["rt-1"])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(familyId: "2")), ["rt-3"])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(familyId: "3")), [])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(realm: "TENANT-A")), ["at-1", "at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(realm: "tenant-b")), ["at-3"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(clientId: "client-a", realm: "tenant-a")), ["at-1"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery()), ["at-1", "at-2", "at-3"])
        // Kinds do not leak into each other.
        XCTAssertEqual(cache.keys(.idToken, CacheQuery(clientId: "client-a")), [])
    }

    func testScopeSuperset() {
        let cache = sampleCache()
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: ["user.read"])), ["at-1", "at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: ["MAIL.READ", "User.Read"])), ["at-1"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: ["User.Read", "Mail.Read", "openid"])), ["at-1"])
        // The cached token holds a subset of what is asked: not a hit.
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: ["User.Read", "Mail.Read", "openid", "profile"])), [])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(clientId: "client-b", scopes: ["User.Read", "Mail.Read"])), [])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: [])), ["at-1", "at-2", "at-3"])
    }

    func testRemovingAndReplacingUpdatesTheIndex() {
        var cache = sampleCache()
        // Replace at-1 under the same key with a token for another account, client, realm, host and scopes.
        cache.put(.accessToken, key: "at-1", accessToken(hid: "uid9.utid", env: "login.microsoftonline.us", client: "client-z",
                                                        realm: "tenant-z", target: "Calendars.Read", secret: "fake-at-1b"))
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid1.utid")), ["at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(clientId: "client-a")), ["at-3"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(realm: "tenant-a")), ["at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: ["mail.read"])), [])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(environment: "login.windows.net")), ["at-2"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid9.utid", environment: "login.microsoftonline.us",
                                                           clientId: "client-z", realm: "tenant-z",
                                                           scopes: ["calendars.read"])), ["at-1"])
        XCTAssertEqual(cache.count(.accessToken), 3)

        XCTAssertEqual(cache.remove(.accessToken, key: "at-1")?.secret, "fake-at-1b")
        XCTAssertNil(cache.remove(.accessToken, key: "at-1"))
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid9.utid")), [])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: ["calendars.read"])), [])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery()), ["at-2", "at-3"])

        // Dropping the family id from rt-1 takes it out of the family bucket.
        cache.put(.refreshToken, key: "rt-1", refreshToken(hid: "uid1.utid", client: "client-a", secret: "fake-rt-1"))
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(familyId: "1")), [])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(clientId: "client-a")), ["rt-1"])

        // Re-adding under a new key: only the new key is found.
        let entity = accessToken(hid: "uid1.utid", client: "client-b", realm: "tenant-a", target: "User.Read", secret: "fake-at-2")
        cache.remove(.accessToken, key: "at-2")
        let key = cache.add(.accessToken, entity)
        XCTAssertEqual(key, "uid1.utid-login.microsoftonline.com-accesstoken-client-b-tenant-a-user.read")
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid1.utid")), [key])
    }

    /// A hit's granted scopes are its token's target, in stored order, split when the token is indexed (once per
    /// target text) or given as a list; a token replaced under its key answers with its new target.
    func testAHitGrantsItsTokensTargetAsStored() {
        var cache = TokenCache()
        let now: Int64 = 1000  // the tokens' expires_on is 4600
        func granted(_ client: String, _ scopes: [String]) -> [String]? {
            cache.cachedHitTokens(homeAccountId: "uid1.utid", clientId: client, environment: "login.microsoftonline.com",
                                  tenant: "tenant-a", scopes: scopes, now: now)?.accessToken.target
        }
        for client in ["client-a", "client-b"] {
            cache.put(.accessToken, key: "at-\(client)", accessToken(hid: "uid1.utid", client: client, realm: "tenant-a",
                                                                    target: "User.Read\tMail.Read  openid",
                                                                    secret: "fake-\(client)"))
        }
        XCTAssertEqual(granted("client-a", ["mail.read"]), ["User.Read", "Mail.Read", "openid"])
        XCTAssertEqual(granted("client-b", ["user.read"]), ["User.Read", "Mail.Read", "openid"])
        var listed = accessToken(hid: "uid1.utid", client: "client-c", realm: "tenant-a", target: "", secret: "fake-c")
        listed[field: "target"] = .array([.string("Files.Read"), .string("User.Read")])
        cache.put(.accessToken, key: "at-client-c", listed)
        XCTAssertEqual(granted("client-c", ["files.read"]), ["Files.Read", "User.Read"])
        cache.put(.accessToken, key: "at-client-a", accessToken(hid: "uid1.utid", client: "client-a", realm: "tenant-a",
                                                               target: "Calendars.Read", secret: "fake-a2"))
        XCTAssertNil(granted("client-a", ["mail.read"]))
        XCTAssertEqual(granted("client-a", ["calendars.read"]), ["Calendars.Read"])
    }

    /// A load decodes the id tokens' `preferred_username` on the thread that builds the entry keys; the index keeps
    /// the same names as when it decodes them itself, and decodes them itself when the keys came without them.
    func testIdTokenUsernamesDecodedBesideTheKeysAreTheOnesTheIndexWouldDecode() {
        func jwt(_ payload: String) -> String {
            let encoded = Data(payload.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            return "eyJhbGciOiJub25lIn0.\(encoded).sig"
        }
        var document = CacheDocument()
        for n in 0..<40 {
            let payload = n % 4 == 0 ? #"{"sub":"x"}"# : #"{"preferred_username":"user\#(n)@contoso.example","sub":"x"}"#
            let secret = n % 9 == 0 ? "not a jwt" : jwt(payload)
            document.entries[.idToken, default: [:]]["idt-\(n)"] = idToken(hid: "uid\(n).utid", client: "client-a",
                                                                         realm: "tenant", secret: secret)
        }
        let caches = [TokenCache(document: document),
                      TokenCache(document: document, entryKeys: { EntryKeys(document, withUsernames: true) }),
                      TokenCache(document: document, entryKeys: { EntryKeys(document) })]
        for n in 0..<40 {
            let expected = n % 4 == 0 || n % 9 == 0 ? nil : "user\(n)@contoso.example"
            for (which, cache) in caches.enumerated() {
                let found = cache.latestIdTokenAndUsername(homeAccountId: "uid\(n).utid", environment: "login.microsoftonline.com",
                                                           clientId: "client-a")
                XCTAssertNotNil(found, "token \(n), cache \(which)")
                XCTAssertEqual(found?.preferredUsername, expected, "token \(n), cache \(which)")
            }
        }
    }

    func testIndexBuiltFromDocumentMatchesIndexBuiltByPuts() throws {
        let document = try CacheDocument.parse(sampleCache().persisted())
        let reloaded = TokenCache(document: document)
        let queries = [
            CacheQuery(homeAccountId: "UID1.utid"), CacheQuery(environment: "sts.windows.net"),
            CacheQuery(clientId: "client-a"), CacheQuery(realm: "tenant-a", scopes: ["user.read"]),
        ]
        for query in queries {
            XCTAssertEqual(reloaded.keys(.accessToken, query), sampleCache().keys(.accessToken, query))
        }
        XCTAssertEqual(reloaded.keys(.refreshToken, CacheQuery(familyId: "1")), ["rt-1"])
    }

    /// 20 000 access tokens: 200 accounts × 20 clients × 5 scope sets; lookups return exactly the right ones.
    func testLargeCacheLookupsAreExact() {
        var cache = TokenCache()
        let scopeSets = [["User.Read"], ["User.Read", "Mail.Read"], ["Files.Read"], ["Calendars.Read", "User.Read"],
                         ["Sites.Read"]]
        for account in 0..<200 {
            for client in 0..<20 {
                for (set, scopes) in scopeSets.enumerated() {
                    let env = account % 2 == 0 ? "login.microsoftonline.com" : "login.windows.net"
                    let entity = accessToken(hid: "uid\(account).utid", env: env, client: "client-\(client)",
                                             realm: "tenant-\(account % 10)", target: scopes.joined(separator: " "),
                                             secret: "fake-at-\(account)-\(client)-\(set)")
                    cache.put(.accessToken, key: "k-\(account)-\(client)-\(set)", entity)
                }
            }
        }
        XCTAssertEqual(cache.count(.accessToken), 20_000)

        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "UID7.utid", clientId: "client-3", scopes: ["user.read"])),
                       ["k-7-3-0", "k-7-3-1", "k-7-3-3"])
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: "uid123.utid", clientId: "client-19",
                                                             realm: "tenant-3", scopes: ["mail.read"])),
                       ["fake-at-123-19-1"])
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(homeAccountId: "uid123.utid", realm: "tenant-4")).count, 0)
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(homeAccountId: "uid42.utid")).count, 100)
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(clientId: "client-5")).count, 1000)
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(clientId: "client-5", scopes: ["sites.read"])).count, 200)
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(realm: "tenant-0", scopes: ["calendars.read", "user.read"])).count,
                       20 * 20)
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(environment: "sts.windows.net")).count, 20_000)
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(environment: "login.microsoftonline.us")).count, 0)
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(scopes: ["user.read", "mail.read", "files.read"])).count, 0)

        // Remove one account's tokens for one client; nothing stale remains, nothing else goes.
        for (key, _) in cache.find(.accessToken, CacheQuery(homeAccountId: "uid7.utid", clientId: "client-3")) {
            cache.remove(.accessToken, key: key)
        }
        XCTAssertEqual(cache.count(.accessToken), 19_995)
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid7.utid", clientId: "client-3")), [])
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(homeAccountId: "uid7.utid")).count, 95)
        XCTAssertEqual(cache.find(.accessToken, CacheQuery(clientId: "client-3")).count, 995)
    }
}
