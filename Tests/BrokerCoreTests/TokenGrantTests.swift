import BrokerCache
import XCTest

/// `TokenCache.save`: the cache's rule for filing an IdP's grant, at the cache level (no OAuth types).
final class TokenGrantTests: XCTestCase {
    private let hid = "uid1.utid1"
    private let now: Int64 = 1_700_000_000

    private func grant(_ scopes: [String]?, refreshToken: String? = "fake-rt", familyId: String? = nil,
                       clientInfo: Bool = true, identity: Bool = true) -> TokenGrant {
        TokenGrant(accessToken: "fake-at-\(scopes?.joined() ?? "")", tokenType: "Bearer", expiresIn: 3600, refreshIn: 1800,
                   grantedScopes: scopes, refreshToken: refreshToken, familyId: familyId,
                   clientInfo: clientInfo ? "eyJ1aWQiOiJ1aWQxIiwidXRpZCI6InV0aWQxIn0" : nil,
                   clientInfoHomeAccountId: clientInfo ? hid : nil,
                   idToken: identity ? .init(raw: "not.a.jwt", subject: "sub-1", objectId: "uid1", tenantId: "utid1",
                                             username: "someone@example.com", name: "Someone") : nil)
    }

    private func context(client: String = "client-a", scopes: [String] = ["User.Read"], used: String? = nil,
                         known: String? = nil) -> GrantContext {
        GrantContext(clientId: client, environment: "login.microsoftonline.com", tenant: "organizations",
                     requestedScopes: scopes, usedRefreshTokenKey: used, knownHomeAccountId: known, now: now)
    }

    func testAGrantFilesEveryEntryUnderMSALsKeysAndIsFoundAgain() throws {
        var cache = TokenCache()
        let saved = try cache.save(grant(["User.Read", "openid", "profile"]), context())
        XCTAssertEqual(saved.homeAccountId, hid)
        XCTAssertEqual(saved.grantedScopes, ["User.Read", "openid", "profile"])
        XCTAssertEqual(cache.count(.accessToken), 1)
        XCTAssertEqual(cache.count(.refreshToken), 1)
        XCTAssertEqual(cache.count(.idToken), 1)
        XCTAssertEqual(cache.count(.account), 1)
        XCTAssertEqual(cache.count(.appMetadata), 1)
        let key = "\(hid)-login.microsoftonline.com-accesstoken-client-a-utid1-user.read openid profile"
        XCTAssertEqual(cache.entity(.accessToken, key: key)?.expiresOn, now + 3600)
        XCTAssertEqual(cache.entity(.accessToken, key: key)?.refreshOn, now + 1800)
        XCTAssertEqual(cache.cachedAccessToken(homeAccountId: hid, clientId: "client-a", environment: "login.windows.net",
                                               tenant: "utid1", scopes: ["user.read"], now: now)?.secret,
                       "fake-at-User.Readopenidprofile")
        XCTAssertEqual(cache.latestIdToken(homeAccountId: hid, environment: "login.microsoftonline.com", clientId: "client-a"),
                       "not.a.jwt")
        let account = try XCTUnwrap(cache.accountSummary(homeAccountId: hid, now: now))
        XCTAssertEqual(account.username, "someone@example.com")
        XCTAssertEqual(account.authorityType, "MSSTS")
        XCTAssertEqual(account.realm, "utid1", "the id_token's tenant, not the authority's alias")
    }

    func testAnOverlappingGrantReplacesTheAppsTokenAndTheOIDCScopesAreNoOverlap() throws {
        var cache = TokenCache()
        _ = try cache.save(grant(["User.Read", "Mail.Read", "openid"]), context())
        _ = try cache.save(grant(["Files.Read", "openid"]), context())  // shares only openid: both stay
        XCTAssertEqual(cache.count(.accessToken), 2)
        _ = try cache.save(grant(["Mail.Read"]), context())  // overlaps the first: it goes
        XCTAssertEqual(Set(cache.all(.accessToken).map(\.entity.target)), [["Files.Read", "openid"], ["Mail.Read"]])
        _ = try cache.save(grant(["Mail.Read"]), context(client: "client-b"))  // another app's token stays apart
        XCTAssertEqual(cache.count(.accessToken), 3)
    }

    func testARedeemedRefreshTokenIsRotatedInPlaceAndKeepsItsFamilyOwner() throws {
        var cache = TokenCache()
        _ = try cache.save(grant(["User.Read"], refreshToken: "fake-frt-1", familyId: "1"), context(client: "client-a"))
        let (key, family) = try XCTUnwrap(cache.all(.refreshToken).first)
        XCTAssertEqual(family.familyId, "1")
        // App B redeems A's family token: the rotated secret goes into A's entry, which stays A's.
        _ = try cache.save(grant(["Files.Read"], refreshToken: "fake-frt-2", familyId: "1"), context(client: "client-b", used: key))
        XCTAssertEqual(cache.count(.refreshToken), 1)
        XCTAssertEqual(cache.entity(.refreshToken, key: key)?.secret, "fake-frt-2")
        XCTAssertEqual(cache.entity(.refreshToken, key: key)?.clientId, "client-a")
        XCTAssertEqual(cache.entity(.refreshToken, key: key)?.lastModificationTime, now)
        // The family membership of each app is on its AppMetadata; an app the IdP gave no family is outside.
        _ = try cache.save(grant(["User.Read"], familyId: nil), context(client: "client-c"))
        let families = Dictionary(uniqueKeysWithValues: cache.all(.appMetadata).map { ($0.entity.clientId ?? "", $0.entity.familyId) })
        XCTAssertEqual(families, ["client-a": "1", "client-b": "1", "client-c": nil])
    }

    func testTheAccountComesFromClientInfoElseTheIdTokenElseTheRequest() throws {
        var cache = TokenCache()
        XCTAssertThrowsError(try cache.save(grant(["User.Read"], clientInfo: false, identity: false), context())) { error in
            XCTAssertEqual(error as? GrantError, .noAccount)
        }
        XCTAssertEqual(cache.count(.accessToken), 0, "nothing is filed under nobody")
        let bySubject = try cache.save(grant(["User.Read"], clientInfo: false), context())
        XCTAssertEqual(bySubject.homeAccountId, "sub-1")
        XCTAssertEqual(cache.accountSummary(homeAccountId: "sub-1", now: now)?.authorityType, "Generic")
        let known = try cache.save(grant(["User.Read"], clientInfo: false, identity: false), context(known: "uid9.utid9"))
        XCTAssertEqual(known.homeAccountId, "uid9.utid9")
        XCTAssertEqual(known.grantedScopes, ["User.Read"])
    }

    func testAbsurdLifetimesAreClamped() throws {
        var cache = TokenCache()
        var absurd = grant(["User.Read"])
        absurd.expiresIn = .max
        absurd.extExpiresIn = -5
        absurd.grantedScopes = nil  // the request's scopes were granted
        let saved = try cache.save(absurd, context(scopes: ["Requested.Scope"]))
        XCTAssertEqual(saved.grantedScopes, ["Requested.Scope"])
        XCTAssertEqual(saved.accessToken.expiresOn, now + 10 * 365 * 86_400)
        XCTAssertEqual(saved.accessToken.extendedExpiresOn, now)
    }
}
