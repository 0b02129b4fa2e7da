import BrokerCache
import BrokerCore
import BrokerJSON
import XCTest

/// SPEC §2: removal is per app, sign-out is everywhere; lookup by homeAccountId or (ADAL migration) username;
/// import merges by credential identity, not by key.
final class AccountOperationsTests: XCTestCase {
    private let alice = "alice-uid.home-tid"
    private let bob = "bob-uid.home-tid"

    /// Alice used clients A and B (A holds the family RT); Bob used client A.
    private func twoClientCache() -> TokenCache {
        var cache = TokenCache()
        cache.add(.account, accountEntry(hid: alice, realm: "home-tid", username: "Alice@Contoso.example"))
        cache.add(.accessToken, accessToken(hid: alice, client: "client-a", realm: "home-tid", target: "User.Read",
                                            secret: "fake-at-alice-a"))
        cache.add(.idToken, idToken(hid: alice, client: "client-a", realm: "home-tid", secret: "fake-idt-alice-a"))
        cache.add(.refreshToken, refreshToken(hid: alice, client: "client-a", secret: "fake-rt-alice-a"))
        cache.put(.refreshToken, key: "\(alice)-login.microsoftonline.com-refreshtoken-1--",
                  refreshToken(hid: alice, client: "client-a", secret: "fake-frt-alice", familyId: "1"))
        cache.add(.accessToken, accessToken(hid: alice, client: "client-b", realm: "home-tid", target: "Mail.Read",
                                            secret: "fake-at-alice-b"))
        cache.add(.idToken, idToken(hid: alice, client: "client-b", realm: "home-tid", secret: "fake-idt-alice-b"))
        cache.add(.refreshToken, refreshToken(hid: alice, client: "client-b", secret: "fake-rt-alice-b"))

        cache.add(.account, accountEntry(hid: bob, realm: "home-tid", username: "bob@contoso.example"))
        cache.add(.accessToken, accessToken(hid: bob, client: "client-a", realm: "home-tid", target: "User.Read",
                                            secret: "fake-at-bob-a"))
        cache.add(.refreshToken, refreshToken(hid: bob, client: "client-a", secret: "fake-rt-bob-a"))
        return cache
    }

    private func allSecrets(_ cache: TokenCache) -> [String] {
        CredentialKind.allCases.flatMap { kind in cache.all(kind).compactMap(\.entity.secret) }.sorted()
    }

    // MARK: Per-app removal vs sign-out

    func testRemoveAccountIsPerClient() {
        var cache = twoClientCache()
        let report = cache.removeAccount(alice, forClient: "client-a")
        XCTAssertEqual(report.accessTokens, 1)
        XCTAssertEqual(report.idTokens, 1)
        XCTAssertEqual(report.refreshTokens, 1)
        XCTAssertEqual(report.familyRefreshTokensKept, 1)
        XCTAssertEqual(report.accounts, 0)

        XCTAssertEqual(allSecrets(cache), [
            "fake-at-alice-b", "fake-at-bob-a", "fake-frt-alice", "fake-idt-alice-b", "fake-rt-alice-b", "fake-rt-bob-a",
        ])
        XCTAssertEqual(cache.count(.account), 2, "the account entry stays for other apps")

        XCTAssertEqual(cache.accountSummaries(visibleTo: "client-a", now: 0).map(\.homeAccountId), [bob])
        XCTAssertEqual(cache.accountSummaries(visibleTo: "CLIENT-A", now: 0).map(\.homeAccountId), [bob])
        XCTAssertEqual(cache.accountSummaries(visibleTo: "client-b", now: 0).map(\.homeAccountId), [alice, bob])
        XCTAssertEqual(cache.accountSummaries(now: 0).map(\.homeAccountId), [alice, bob])

        let summary = cache.accountSummaries(visibleTo: "client-b", now: 0)[0]
        XCTAssertEqual(summary.hiddenFrom, ["client-a"])
        XCTAssertEqual(summary.apps.map(\.clientId), ["client-a", "client-b"])
        XCTAssertEqual(summary.apps[0].familyId, "1")
        XCTAssertEqual(summary.apps[0].accessTokens, [])
        XCTAssertEqual(summary.apps[1].accessTokens.map(\.scopes), [["Mail.Read"]])
        XCTAssertTrue(cache.state.isHidden(alice, from: "client-a"))
        XCTAssertFalse(cache.state.isHidden(alice, from: "client-b"))
        XCTAssertFalse(cache.state.isHidden(bob, from: "client-a"))
    }

    func testSignOutRemovesEverythingOfTheAccountOnly() {
        var cache = twoClientCache()
        _ = cache.removeAccount(alice, forClient: "client-a")
        let report = cache.signOut(alice.uppercased())
        XCTAssertEqual(report.accessTokens, 1)
        XCTAssertEqual(report.refreshTokens, 2, "including the family refresh token")
        XCTAssertEqual(report.idTokens, 1)
        XCTAssertEqual(report.accounts, 1)
        XCTAssertEqual(allSecrets(cache), ["fake-at-bob-a", "fake-rt-bob-a"])
        XCTAssertEqual(cache.accountSummaries(now: 0).map(\.homeAccountId), [bob])
        XCTAssertEqual(cache.state.hidden, [:], "nothing is remembered about a signed-out account")
        XCTAssertThrowsError(try cache.resolve(.homeAccountId(alice)))
    }

    func testSignOutWithoutPriorRemovalTakesEveryClientsTokens() {
        var cache = twoClientCache()
        let report = cache.signOut(alice)
        XCTAssertEqual(report.accessTokens, 2)
        XCTAssertEqual(report.refreshTokens, 3)
        XCTAssertEqual(report.idTokens, 2)
        XCTAssertEqual(report.accounts, 1)
        XCTAssertEqual(allSecrets(cache), ["fake-at-bob-a", "fake-rt-bob-a"])
    }

    func testHiddenStateIsPersistedButNotExported() throws {
        var cache = twoClientCache()
        _ = cache.removeAccount(alice, forClient: "client-a")

        let reloaded = TokenCache(document: try CacheDocument.parse(cache.persisted()))
        XCTAssertEqual(reloaded.state.hidden, ["client-a": [alice]])
        XCTAssertEqual(reloaded.accountSummaries(visibleTo: "client-a", now: 0).map(\.homeAccountId), [bob])
        XCTAssertEqual(reloaded.accountSummaries(visibleTo: "client-b", now: 0).map(\.homeAccountId), [alice, bob])
        XCTAssertNil(reloaded.otherSection(BrokerState.sectionName), "the section is taken into state, not kept as unknown")
        XCTAssertEqual(reloaded.persisted(), cache.persisted())

        let exported = reloaded.exported()
        XCTAssertEqual(try memberNames(in: exported, at: []),
                       ["AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata"])
        XCTAssertFalse(contains(exported, "hiddenAccounts"))
        XCTAssertFalse(contains(exported, BrokerState.sectionName + "\""))
        XCTAssertTrue(contains(cache.persisted(), "\"hiddenAccounts\""))

        // Importing the export elsewhere shows the account to every client.
        let elsewhere = TokenCache(document: try CacheDocument.parse(exported))
        XCTAssertEqual(elsewhere.accountSummaries(visibleTo: "client-a", now: 0).map(\.homeAccountId), [alice, bob])
    }

    // MARK: Lookup

    func testResolveByUsernameAndHomeAccountId() throws {
        let cache = twoClientCache()
        XCTAssertEqual(try cache.resolve(.username("alice@contoso.example")), alice)
        XCTAssertEqual(try cache.resolve(.username("ALICE@CONTOSO.EXAMPLE")), alice)
        XCTAssertEqual(try cache.resolve(.homeAccountId("BOB-UID.HOME-TID")), bob)
        XCTAssertEqual(try cache.resolve(.either(bob)), bob)
        XCTAssertEqual(try cache.resolve(.either("Bob@Contoso.Example")), bob)
        XCTAssertThrowsError(try cache.resolve(.username("carol@contoso.example"))) { error in
            XCTAssertEqual(error as? TokenCache.LookupError, .notFound("username carol@contoso.example"))
        }
        XCTAssertThrowsError(try cache.resolve(.homeAccountId("nobody.home-tid"))) { error in
            XCTAssertEqual(error as? TokenCache.LookupError, .notFound("homeAccountId nobody.home-tid"))
        }
        XCTAssertThrowsError(try cache.resolve(.either("nobody"))) { error in
            XCTAssertEqual(error as? TokenCache.LookupError, .notFound("nobody"))
        }
        // A username is not a homeAccountId.
        XCTAssertThrowsError(try cache.resolve(.homeAccountId("alice@contoso.example")))
    }

    func testAmbiguousUsername() {
        var cache = twoClientCache()
        cache.add(.account, accountEntry(hid: "other-uid.other-tid", realm: "other-tid", username: "alice@CONTOSO.example"))
        XCTAssertThrowsError(try cache.resolve(.username("alice@contoso.example"))) { error in
            XCTAssertEqual(error as? TokenCache.LookupError,
                           .ambiguous("alice@contoso.example", matches: [alice, "other-uid.other-tid"]))
        }
        // The homeAccountId still names each one.
        XCTAssertEqual(try cache.resolve(.homeAccountId("other-uid.other-tid")), "other-uid.other-tid")
    }

    func testGuestTenantProfilesGroupIntoOneAccount() throws {
        var cache = TokenCache()
        cache.add(.account, accountEntry(hid: alice, realm: "guest-tid", username: "alice@contoso.example",
                                         localAccountId: "guest-oid"))
        cache.add(.account, accountEntry(hid: alice, env: "login.windows.net", realm: "home-tid",
                                         username: "alice@contoso.example", localAccountId: "home-oid"))
        XCTAssertEqual(cache.count(.account), 2)
        XCTAssertEqual(try cache.resolve(.username("alice@contoso.example")), alice)

        let summaries = cache.accountSummaries(now: 0)
        XCTAssertEqual(summaries.count, 1)
        let summary = try XCTUnwrap(summaries.first)
        XCTAssertEqual(summary.homeAccountId, alice)
        XCTAssertEqual(summary.realm, "home-tid", "the home tenant's profile is the primary one")
        XCTAssertEqual(summary.localAccountId, "home-oid")
        XCTAssertEqual(summary.environment, "login.windows.net")
        XCTAssertEqual(summary.tenants.map(\.realm), ["guest-tid", "home-tid"])
        XCTAssertEqual(summary.tenants.map(\.localAccountId), ["guest-oid", "home-oid"])
    }

    // MARK: Import

    func testMergeReplacesTheSameCredentialUnderAnotherKey() throws {
        var cache = TokenCache()
        cache.add(.accessToken, accessToken(hid: alice, client: "client-a", realm: "home-tid", target: "User.Read Mail.Read",
                                            secret: "fake-at-old", cachedAt: "1000"))
        cache.add(.refreshToken, refreshToken(hid: alice, client: "client-a", secret: "fake-rt-old", lastModified: "1000"))

        var incoming = CacheDocument()
        let dotnetATKey = "\(alice)-login.windows.net-accesstoken-client-a-home-tid-mail.read user.read"
        incoming.entries[.accessToken] = [
            dotnetATKey: accessToken(hid: alice.uppercased(), env: "login.windows.net", client: "Client-A", realm: "HOME-TID",
                                     target: "mail.read USER.READ", secret: "fake-at-new", cachedAt: "2000"),
        ]
        incoming.entries[.refreshToken] = [
            "\(alice)-login.windows.net-refreshtoken-client-a--":
                refreshToken(hid: alice, env: "login.windows.net", client: "client-a", secret: "fake-rt-new",
                             lastModified: "2000"),
        ]
        let report = cache.merge(incoming)
        XCTAssertEqual(report.replaced, 2)
        XCTAssertEqual(report.added, 0)
        XCTAssertEqual(report.keptNewer, 0)
        XCTAssertEqual(cache.count(.accessToken), 1)
        XCTAssertEqual(cache.count(.refreshToken), 1)
        XCTAssertEqual(cache.all(.accessToken).map(\.key), [dotnetATKey])
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: alice)), ["fake-at-new"])
        XCTAssertEqual(cache.secrets(.refreshToken, CacheQuery(homeAccountId: alice)), ["fake-rt-new"])

        // Importing the same document again changes nothing.
        let again = cache.merge(incoming)
        XCTAssertEqual(again.replaced, 2)
        XCTAssertEqual(cache.count(.accessToken), 1)
        XCTAssertEqual(cache.count(.refreshToken), 1)
    }

    /// An access token is the same credential only for the same set of scopes: a subset, a superset or an overlap is
    /// another token (added beside it); repeats, order and case do not matter.
    func testMergeComparesAccessTokenScopesAsSets() {
        var cache = TokenCache()
        func hold(_ target: String) {
            cache = TokenCache()
            cache.add(.accessToken, accessToken(hid: alice, client: "client-a", realm: "home-tid", target: target,
                                                secret: "fake-at-held", cachedAt: "1000"))
        }
        func merged(_ target: String) -> ImportReport {
            var incoming = CacheDocument()
            incoming.entries[.accessToken] = [
                "key-\(target)": accessToken(hid: alice, client: "client-a", realm: "home-tid", target: target,
                                             secret: "fake-at-\(target)", cachedAt: "2000"),
            ]
            var copy = cache
            return copy.merge(incoming)
        }
        hold("User.Read Mail.Read")
        for other in ["User.Read", "User.Read Mail.Read Files.Read", "Mail.Read Files.Read", "Files.Read", ""] {
            let report = merged(other)
            XCTAssertEqual([report.added, report.replaced], [1, 0], other)
        }
        for same in ["mail.read user.read", "USER.READ  Mail.Read Mail.Read", "Mail.Read\tUser.Read"] {
            let report = merged(same)
            XCTAssertEqual([report.added, report.replaced], [0, 1], same)
        }
        // A target that is not ASCII is compared by the general path, with Unicode case.
        hold("Dätä.Read User.Read")
        XCTAssertEqual(merged("user.read DÄTÄ.READ").replaced, 1)
        XCTAssertEqual(merged("User.Read Data.Read").added, 1)
        hold("")
        XCTAssertEqual(merged(" ").replaced, 1, "no scopes is no scopes")
        XCTAssertEqual(merged("User.Read").added, 1)
    }

    func testMergeKeepsANewerRefreshToken() {
        var cache = TokenCache()
        cache.add(.refreshToken, refreshToken(hid: alice, client: "client-a", secret: "fake-rt-newer", lastModified: "2000"))
        var incoming = CacheDocument()
        incoming.entries[.refreshToken] = [
            "some-other-key": refreshToken(hid: alice, client: "client-a", secret: "fake-rt-older", lastModified: "1000"),
        ]
        let report = cache.merge(incoming)
        XCTAssertEqual(report.keptNewer, 1)
        XCTAssertEqual(report.replaced, 0)
        XCTAssertEqual(report.added, 0)
        XCTAssertEqual(cache.count(.refreshToken), 1)
        XCTAssertEqual(cache.secrets(.refreshToken, CacheQuery()), ["fake-rt-newer"])
        XCTAssertNil(cache.entity(.refreshToken, key: "some-other-key"))
    }

    func testMergeTreatsFamilyAndPlainRefreshTokensAsDifferent() {
        var cache = TokenCache()
        cache.add(.refreshToken, refreshToken(hid: alice, client: "client-a", secret: "fake-rt-plain", lastModified: "1000"))
        var incoming = CacheDocument()
        incoming.entries[.refreshToken] = [
            "\(alice)-login.microsoftonline.com-refreshtoken-1--":
                refreshToken(hid: alice, client: "client-a", secret: "fake-frt", familyId: "1", lastModified: "2000"),
        ]
        let report = cache.merge(incoming)
        XCTAssertEqual(report.added, 1)
        XCTAssertEqual(cache.secrets(.refreshToken, CacheQuery(homeAccountId: alice)), ["fake-frt", "fake-rt-plain"])
    }

    func testMergeImportsUnknownSectionsAndNewEntries() throws {
        var cache = twoClientCache()
        _ = cache.removeAccount(bob, forClient: "client-a")
        let document = try Fixture.document("msal4j")
        let report = cache.merge(document)
        XCTAssertEqual(report.added, 4)
        XCTAssertEqual(report.accounts, 1)
        XCTAssertEqual(cache.otherSection("unknownEntity"),
                       "{\n    \"field1\" : \"1\",\n    \"field2\" : \"whats\"\n  }")
        XCTAssertEqual(try rawValue(in: cache.exported(), at: ["unknownEntity"]),
                       try rawValue(in: try Fixture.bytes("msal4j"), at: ["unknownEntity"]))
        XCTAssertEqual(cache.secrets(.refreshToken, CacheQuery(clientId: "j-client")), ["fake-rt-j-1"])
        XCTAssertEqual(Set(cache.accountSummaries(now: 0).map(\.homeAccountId)), [alice, bob, "j-uid.j-utid"])
        XCTAssertTrue(cache.state.isHidden(bob, from: "client-a"), "an unrelated import does not unhide")
    }

    func testMergeDoesNotImportAnotherBrokersState() throws {
        var source = twoClientCache()
        _ = source.removeAccount(alice, forClient: "client-b")
        var cache = TokenCache()
        _ = cache.merge(try CacheDocument.parse(source.persisted()))
        XCTAssertEqual(cache.state.hidden, [:])
        XCTAssertNil(cache.otherSection(BrokerState.sectionName))
    }

    /// ADFS accounts written by MSAL.NET have no realm; importing the same account under another key must not
    /// duplicate it (merge looks the entry up with realm "").
    func testMergeReplacesRealmlessEntriesUnderAnotherKey() throws {
        var cache = try Fixture.cache("adfs")
        XCTAssertEqual(cache.count(.account), 2)
        var incoming = CacheDocument()
        var account = try XCTUnwrap(cache.entity(.account, key: "Fake-Sub-AbC+/9=-fs.contoso.example-"))
        account.set("username", "renamed@contoso.example")
        incoming.entries[.account] = ["fake-sub-abc+/9=-fs.contoso.example-": account]
        let report = cache.merge(incoming)
        XCTAssertEqual(report.replaced, 1)
        XCTAssertEqual(report.added, 0)
        XCTAssertEqual(cache.count(.account), 2)
        XCTAssertEqual(cache.accountSummaries(now: 0).map(\.username), ["JaneDoe@example.com", "renamed@contoso.example"])
    }

    /// An import merges its document in parts (CacheDocument.parts(of:)): every entry in exactly one part, in
    /// section order, each part full but the last, which carries the opaque entries and the unknown sections; merged
    /// in order (room made first), the parts give what the whole document gives.
    func testADocumentInPartsHoldsEveryEntryOnceAndMergesAsTheWhole() {
        var document = CacheDocument()
        for n in 0..<23 {
            let hid = "uid\(n).utid"
            document.entries[.accessToken, default: [:]]["at-\(n)"] =
                accessToken(hid: hid, client: "client-a", realm: "tenant", target: "User.Read", secret: "fake-at-\(n)")
            if n % 2 == 0 {
                document.entries[.refreshToken, default: [:]]["rt-\(n)"] =
                    refreshToken(hid: hid, client: "client-a", secret: "fake-rt-\(n)")
            }
        }
        document.entries[.account] = [:]
        document.opaqueEntries[.accessToken] = ["not-an-object": "42"]
        document.otherSections = [("customized", #""whatever""#)]
        for size in [1, 5, 12, 35, 36, 1_000] {
            let parts = document.parts(of: size)
            let counts = parts.map { part in part.entries.values.reduce(0) { $0 + $1.count } }
            XCTAssertEqual(counts.reduce(0, +), 35, "size \(size)")
            XCTAssertTrue(counts.dropLast().allSatisfy { $0 == size }, "size \(size): \(counts)")
            XCTAssertTrue(parts.dropLast().allSatisfy { $0.opaqueEntries.isEmpty && $0.otherSections.isEmpty })
            XCTAssertEqual(parts.last?.opaqueEntries, document.opaqueEntries)
            var whole = TokenCache(), inParts = TokenCache()
            _ = whole.merge(document)
            inParts.reserveCapacity(forMerging: document)  // as an import does first
            for part in parts { _ = inParts.merge(part) }
            XCTAssertEqual(inParts.document, whole.document, "size \(size)")
        }
    }
}
