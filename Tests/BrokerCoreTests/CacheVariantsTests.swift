import BrokerCache
import BrokerCore
import BrokerJSON
import XCTest

/// Lenient reads of every SDK's cache variant (reference §1, §8): typed accessors and field-based lookups.
final class CacheVariantsTests: XCTestCase {
    // MARK: msal-python

    func testPythonVariant() throws {
        let cache = try Fixture.cache("python")
        XCTAssertEqual(cache.count(.accessToken), 1)
        XCTAssertEqual(cache.count(.refreshToken), 1)
        XCTAssertEqual(cache.count(.idToken), 1)
        XCTAssertEqual(cache.count(.account), 1)
        XCTAssertEqual(cache.count(.appMetadata), 1)

        let at = try XCTUnwrap(cache.entity(.accessToken, key: "uid.utid-login.example.com-accesstoken-py_client_id-contoso-s1 s2 s3"))
        XCTAssertEqual(at.cachedAt, 1000)
        XCTAssertEqual(at.expiresOn, 4600)
        XCTAssertEqual(at.extendedExpiresOn, 4800)
        XCTAssertEqual(at.target, ["s1", "s2", "s3"])
        XCTAssertEqual(at.keyId, "fake-key-id-py")
        XCTAssertEqual(at.tokenType, "some type")
        XCTAssertEqual(at.clientId, "Py_Client_ID")
        XCTAssertEqual(at.realm, "contoso")
        XCTAssertEqual(at.secret, "fake-at-py-1")
        XCTAssertEqual(at.credentialType, "AccessToken")
        XCTAssertNil(at.refreshOn)

        let rt = try XCTUnwrap(cache.entity(.refreshToken, key: "uid.utid-login.example.com-refreshtoken-py_client_id--s1 s2 s3"))
        XCTAssertEqual(rt.familyId, "1")
        XCTAssertEqual(rt.lastModificationTime, 1000)

        // AppMetadata key keeps the client id's case (msal-python does not lowercase it); lookups ignore case.
        let appKey = "appmetadata-login.example.com-Py_Client_ID"
        XCTAssertEqual(cache.entity(.appMetadata, key: appKey)?.familyId, "1")
        XCTAssertNil(cache.entity(.appMetadata, key: appKey.lowercased()))
        XCTAssertEqual(cache.keys(.appMetadata, CacheQuery(environment: "login.example.com", clientId: "py_client_id")),
                       [appKey])
        XCTAssertEqual(cache.keys(.appMetadata, CacheQuery(familyId: "1")), [appKey])

        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: "UID.UTID", environment: "login.example.com",
                                                             clientId: "py_client_id", realm: "Contoso",
                                                             scopes: ["S2", "s1"])), ["fake-at-py-1"])
        XCTAssertEqual(cache.secrets(.refreshToken, CacheQuery(familyId: "1")), ["fake-rt-py-1"])
        let account = try XCTUnwrap(cache.find(.account, CacheQuery(homeAccountId: "uid.utid")).first?.entity)
        XCTAssertEqual(account.username, "john.doe@contoso.example")
        XCTAssertEqual(account.localAccountId, "object1234")
        XCTAssertEqual(account.authorityType, "MSSTS")
    }

    // MARK: MSAL.NET

    func testDotNetVariantWithByteOrderMarkAndTrailingCommas() throws {
        let bytes = try Fixture.bytes("dotnet")
        XCTAssertEqual(Array(bytes.prefix(3)), [0xEF, 0xBB, 0xBF], "fixture must start with a BOM")
        XCTAssertThrowsError(try JSONReader.parse(bytes), "the fixture is not strict JSON")
        let cache = TokenCache(document: try CacheDocument.parse(bytes))
        XCTAssertEqual(cache.count(.accessToken), 1)
        XCTAssertEqual(cache.count(.refreshToken), 2)
        XCTAssertEqual(cache.count(.account), 1)

        let at = try XCTUnwrap(cache.find(.accessToken, CacheQuery(homeAccountId: "dn-uid.dn-utid")).first?.entity)
        XCTAssertEqual(at.environment, "login.windows.net")
        XCTAssertEqual(at.expiresOn, 1_700_003_600)
        XCTAssertEqual(at.extendedExpiresOn, 1_700_090_000, "falls back to ext_expires_on")
        XCTAssertEqual(at.keyId, "fake-kid-dn", "kid is the .NET spelling of key_id")
        XCTAssertEqual(at.tokenType, "Bearer", ".NET omits token_type for Bearer")
        XCTAssertEqual(at.string("client_info"), "eyJ1aWQiOiJkbi11aWQiLCJ1dGlkIjoiZG4tdXRpZCJ9")
        XCTAssertEqual(at.target, ["r1/scope1", "r1/scope2"])

        // FOCI RT keyed by the family id, not the client id; found by client or by family.
        let frtKey = "dn-uid.dn-utid-login.windows.net-refreshtoken-1--"
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(familyId: "1")), [frtKey])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(homeAccountId: "dn-uid.dn-utid", clientId: "dn-client")),
                       [frtKey])
        // family_id null means "no family".
        let plain = try XCTUnwrap(cache.find(.refreshToken, CacheQuery(clientId: "dn-other-client")).first?.entity)
        XCTAssertNil(plain.familyId)
        XCTAssertEqual(plain.secret, "fake-rt-dn-2")

        // login.windows.net entries are found with login.microsoftonline.com (and the other aliases).
        for host in ["login.microsoftonline.com", "LOGIN.WINDOWS.NET", "sts.windows.net", "login.microsoft.com"] {
            XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(environment: host, scopes: ["r1/SCOPE2"])),
                           ["fake-at-dn-1"], host)
            XCTAssertEqual(cache.secrets(.idToken, CacheQuery(environment: host, realm: "dn-utid")), ["fake-idt-dn-1"], host)
        }
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(environment: "login.microsoftonline.us")), [])
        let account = try XCTUnwrap(cache.all(.account).first?.entity)
        XCTAssertEqual(account.displayName, "Dot Net User")
        XCTAssertEqual(account.string("account_source"), "device_code_flow")
    }

    // MARK: Early msal-python

    func testEarlyPythonVariantWithListTargetAndFloatTimestamps() throws {
        let cache = try Fixture.cache("python-early")
        let at = try XCTUnwrap(cache.entity(.accessToken, key: "early-at-key"))
        XCTAssertEqual(at.target, ["profile", "openid", "User.Read"])
        XCTAssertEqual(at.cachedAt, 1_548_804_634)
        XCTAssertEqual(at.expiresOn, 1_548_808_234)
        XCTAssertEqual(at.extendedExpiresOn, 1_548_808_234)
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: ["user.read", "OPENID"])), ["early-at-key"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(scopes: ["user.read", "mail.read"])), [])
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(homeAccountId: "early-uid.early-utid", scopes: ["profile"])),
                       ["early-rt-key"])
        let account = try XCTUnwrap(cache.entity(.account, key: "early-account-key"))
        XCTAssertEqual(account.authorityType, "AAD")
        XCTAssertEqual(account.username, "early@contoso.example")
    }

    // MARK: msal4j

    func testMsal4jVariantWithNullFamilyId() throws {
        let document = try Fixture.document("msal4j")
        XCTAssertEqual(document.otherSections.map(\.name), ["unknownEntity"])
        let cache = TokenCache(document: document)
        let app = try XCTUnwrap(cache.entity(.appMetadata, key: "appmetadata-login.microsoftonline.com-j-client"))
        XCTAssertEqual(app.fields["family_id"], .null)
        XCTAssertNil(app.familyId)
        XCTAssertEqual(cache.keys(.appMetadata, CacheQuery(familyId: "1")), [])
        XCTAssertEqual(cache.keys(.appMetadata, CacheQuery(clientId: "J-CLIENT")),
                       ["appmetadata-login.microsoftonline.com-j-client"])
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(realm: "common", scopes: ["calendars.read"])), ["fake-at-j-1"])
        XCTAssertEqual(cache.secrets(.refreshToken, CacheQuery(clientId: "j-client")), ["fake-rt-j-1"])
    }

    func testEmptyStringFamilyIdMeansNoFamily() {
        var entity = makeEntity(["client_id": "c", "environment": "login.microsoftonline.com"])
        XCTAssertNil(entity.familyId)
        entity.set("family_id", "")
        XCTAssertNil(entity.familyId)
        entity.set("family_id", "1")
        XCTAssertEqual(entity.familyId, "1")
    }

    // MARK: msal-node

    func testNodeVariantWithEightPartKeys() throws {
        let cache = try Fixture.cache("node")
        let hid = "node-uid.node-utid"
        XCTAssertEqual(cache.keys(.refreshToken, CacheQuery(homeAccountId: hid, clientId: "node_client")),
                       ["node-uid.node-utid-login.microsoftonline.com-refreshtoken-node_client----"])
        XCTAssertEqual(cache.keys(.idToken, CacheQuery(homeAccountId: hid, realm: "node-utid")),
                       ["node-uid.node-utid-login.microsoftonline.com-idtoken-node_client-node-utid---"])
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: hid, scopes: ["scope1"])), ["fake-at-node-1"])
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: hid)), ["fake-at-node-1", "fake-pop-at-node-1"])

        let pop = try XCTUnwrap(cache.find(.accessToken, CacheQuery(scopes: ["scope5"])).first?.entity)
        XCTAssertEqual(pop.credentialType, "AccessToken_With_AuthScheme")
        XCTAssertEqual(pop.tokenType, "pop")
        XCTAssertEqual(pop.keyId, "fake-node-key-id")

        let account = try XCTUnwrap(cache.find(.account, CacheQuery(homeAccountId: hid)).first?.entity)
        XCTAssertEqual(account.string("client_info"), "eyJ1aWQiOiJub2RlLXVpZCIsICJ1dGlkIjoibm9kZS11dGlkIn0=")
        XCTAssertEqual(account.username, "node.user@contoso.example")
        XCTAssertEqual(cache.count(.appMetadata), 0)
    }

    // MARK: ObjC macOS

    func testObjCMacFractionalModificationTime() throws {
        let cache = try Fixture.cache("objc-mac")
        let rt = try XCTUnwrap(cache.find(.refreshToken, CacheQuery(clientId: "mac-client")).first?.entity)
        XCTAssertEqual(rt.lastModificationTime, 1_562_842_351)
        XCTAssertEqual(rt.string("last_modification_time"), "1562842351.202", "read value is not altered")
        XCTAssertEqual(rt.fields["last_modification_app"], .raw(#""com.example.macapp""#))
        let account = try XCTUnwrap(cache.find(.account, CacheQuery(homeAccountId: "MAC-UID.MAC-UTID")).first?.entity)
        XCTAssertEqual(account.lastModificationTime, 1_562_842_351)
    }

    // MARK: ADFS

    func testADFSVariants() throws {
        let cache = try Fixture.cache("adfs")
        // .NET ADFS: home_account_id is the id_token sub, no realm at all.
        let netHid = "Fake-Sub-AbC+/9="
        let netAT = try XCTUnwrap(cache.find(.accessToken, CacheQuery(homeAccountId: netHid)).first?.entity)
        XCTAssertNil(netAT.realm)
        XCTAssertEqual(netAT.secret, "fake-at-adfs-1")
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: "fake-sub-abc+/9=", environment: "FS.contoso.example",
                                                             clientId: "adfs-client", scopes: ["openid"])),
                       ["fake-at-adfs-1"])
        // Python ADFS: realm "adfs", authority_type ADFS, home_account_id = sub.
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(realm: "ADFS")), ["fake-at-adfs-2"])
        let pyAccount = try XCTUnwrap(cache.entity(.account, key: "subject-fs.example.org-adfs"))
        XCTAssertEqual(pyAccount.authorityType, "ADFS")
        XCTAssertEqual(pyAccount.localAccountId, "subject")
        XCTAssertEqual(try cache.resolve(.username("janedoe@EXAMPLE.com")), "subject")

        let summaries = cache.accountSummaries(now: 0)
        XCTAssertEqual(summaries.map(\.username), ["adfs.user@contoso.example", "JaneDoe@example.com"])
        XCTAssertEqual(summaries.first?.homeAccountId, netHid)
        XCTAssertEqual(summaries.first?.realm, "")
        XCTAssertEqual(summaries.last?.realm, "adfs")
    }

    /// The broker looks up an entry's realm-less counterpart with realm "" (merge does); absent and empty realm
    /// must be the same thing for `find`, as they already are for the field comparison.
    func testQueryWithEmptyRealmFindsEntriesWithoutRealm() throws {
        let cache = try Fixture.cache("adfs")
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: "Fake-Sub-AbC+/9=", realm: "")),
                       ["fake-at-adfs-1"])
        XCTAssertEqual(cache.keys(.account, CacheQuery(environment: "fs.contoso.example", realm: "")),
                       ["Fake-Sub-AbC+/9=-fs.contoso.example-"])
    }

    // MARK: B2C

    func testB2CHomeAccountIdCarriesThePolicy() throws {
        let cache = try Fixture.cache("b2c")
        let hid = "b2c-uid-b2c_1_signin.b2c-utid"
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: "B2C-UID-B2C_1_SIGNIN.B2C-UTID",
                                                             environment: "fabrikamb2c.b2clogin.com",
                                                             scopes: ["https://fabrikamb2c.example/api/read"])),
                       ["fake-at-b2c-1"])
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(homeAccountId: "b2c-uid.b2c-utid")), [])
        XCTAssertEqual(try cache.resolve(.homeAccountId(hid)), hid)
        let summary = try XCTUnwrap(cache.accountSummaries(now: 0).first)
        XCTAssertEqual(summary.homeAccountId, hid)
        XCTAssertEqual(summary.realm, "b2c-utid")
        XCTAssertEqual(summary.username, "Missing from the token response")
        XCTAssertEqual(summary.apps.map(\.clientId), ["b2c-client"])
    }

    // MARK: Keys are opaque

    func testFindIgnoresKeys() throws {
        var cache = TokenCache()
        let at = accessToken(hid: "uid.utid", client: "client-a", realm: "tenant", target: "User.Read", secret: "fake-at-1")
        cache.put(.accessToken, key: "completely-wrong-key", at)
        cache.put(.accessToken, key: "", accessToken(hid: "other.utid", client: "client-a", realm: "tenant",
                                                        target: "User.Read", secret: "fake-at-2"))
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "uid.utid", clientId: "client-a")),
                       ["completely-wrong-key"])
        XCTAssertEqual(cache.keys(.accessToken, CacheQuery(homeAccountId: "other.utid")), [""])
        XCTAssertEqual(cache.secrets(.accessToken, CacheQuery(scopes: ["user.read"])), ["fake-at-1", "fake-at-2"])
        XCTAssertEqual(at.canonicalKey(as: .accessToken),
                       "uid.utid-login.microsoftonline.com-accesstoken-client-a-tenant-user.read")
    }

    func testCanonicalKeysMatchPythonGoldenVector() {
        // Appendix A (msal-python testAddByAad): keys for the golden entries.
        let at = makeEntity(["home_account_id": "uid.utid", "environment": "login.example.com", "client_id": "my_client_id",
                             "realm": "contoso", "target": "s1 s2 s3"])
        XCTAssertEqual(at.canonicalKey(as: .accessToken), "uid.utid-login.example.com-accesstoken-my_client_id-contoso-s1 s2 s3")
        XCTAssertEqual(at.canonicalKey(as: .refreshToken), "uid.utid-login.example.com-refreshtoken-my_client_id--s1 s2 s3")
        XCTAssertEqual(at.canonicalKey(as: .idToken), "uid.utid-login.example.com-idtoken-my_client_id-contoso-")
        XCTAssertEqual(at.canonicalKey(as: .account), "uid.utid-login.example.com-contoso")
        let app = makeEntity(["environment": "login.example.com", "client_id": "My_Client_ID"])
        XCTAssertEqual(app.canonicalKey(as: .appMetadata), "appmetadata-login.example.com-My_Client_ID")
    }

    func testNonObjectDocumentIsRejected() {
        XCTAssertThrowsError(try CacheDocument.parse(Array("[]".utf8)))
        XCTAssertThrowsError(try CacheDocument.parse(Array(#"{"AccessToken": {"k": {"a": }}}"#.utf8)))
        XCTAssertEqual(try CacheDocument.parse(Array(" \n".utf8)).entityCount, 0)
        XCTAssertEqual(try CacheDocument.parse([]).entityCount, 0)
    }
}
