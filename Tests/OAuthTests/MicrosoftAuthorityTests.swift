@testable import BrokerCache
@testable import BrokerCore
import BrokerJSON
import XCTest

/// Authority kinds, validation helpers and the claims parameter (the Microsoft identity platform's rules).
final class MicrosoftAuthorityTests: XCTestCase {
    func testKinds() throws {
        let entra = try XCTUnwrap(Authority("https://login.microsoftonline.com/Contoso.onmicrosoft.com/"))
        XCTAssertEqual(entra.kind, .entra)
        XCTAssertEqual(entra.tenant, "Contoso.onmicrosoft.com")
        XCTAssertEqual(entra.discoveryBase, "https://login.microsoftonline.com/Contoso.onmicrosoft.com/v2.0")
        XCTAssertFalse(entra.isTenantAlias)
        XCTAssertTrue(try XCTUnwrap(Authority("https://login.microsoftonline.us/organizations")).isTenantAlias)
        XCTAssertEqual(Authority("https://login.chinacloudapi.cn/common")?.kind, .entra)
        XCTAssertNil(Authority("https://login.microsoftonline.com"), "an Entra authority names a tenant")

        let tfp = try XCTUnwrap(Authority("https://contosob2c.b2clogin.com/tfp/contosob2c.onmicrosoft.com/B2C_1_SignIn"))
        XCTAssertEqual(tfp.kind, .b2c)
        XCTAssertEqual(tfp.tenant, "contosob2c.onmicrosoft.com")
        XCTAssertEqual(tfp.policy, "b2c_1_signin")
        let plain = try XCTUnwrap(Authority("https://contosob2c.b2clogin.com/contosob2c.onmicrosoft.com/B2C_1_signin"))
        XCTAssertEqual(plain.kind, .b2c)
        XCTAssertEqual(plain.policy, "b2c_1_signin")
        XCTAssertEqual(Authority("https://login.contoso.example/contoso.example/B2C_1_x", b2cHosts: ["login.contoso.example"])?.kind, .b2c)
        XCTAssertNil(Authority("https://contosob2c.b2clogin.com/contosob2c.onmicrosoft.com"), "B2C needs a policy")

        let adfs = try XCTUnwrap(Authority("https://fs.contoso.example/adfs/"))
        XCTAssertEqual(adfs.kind, .adfs)
        XCTAssertEqual(adfs.discoveryBase, "https://fs.contoso.example/adfs")
        XCTAssertEqual(Authority("https://idp.example.com/realms/main")?.kind, .oidc)
    }

    func testEntraShapedAuthoritiesOnOtherHosts() {
        XCTAssertTrue(Authority("https://evil.example/common")!.looksLikeEntra)
        XCTAssertTrue(Authority("https://evil.example/11111111-2222-3333-4444-555555555555")!.looksLikeEntra)
        XCTAssertFalse(Authority("https://idp.example.com/realms/main")!.looksLikeEntra)
        XCTAssertFalse(Authority("https://idp.example.com")!.looksLikeEntra)
        XCTAssertFalse(Authority("https://evil.example/1111-2222")!.looksLikeEntra)
        let trusted = Authority("https://login.private.example/common", trustedHosts: ["login.private.example"])
        XCTAssertEqual(trusted?.kind, .entra, "a trusted host is an Entra authority (v2.0 discovery, home tenant)")
        XCTAssertEqual(trusted?.isTenantAlias, true)
    }

    func testTenantIdInIssuer() {
        XCTAssertEqual(Authority.tenantId(inIssuer: "https://login.microsoftonline.com/22222222-2222-2222-2222-222222222222/v2.0"),
                       "22222222-2222-2222-2222-222222222222")
        XCTAssertNil(Authority.tenantId(inIssuer: "https://login.microsoftonline.com/{tenantid}/v2.0"))
        XCTAssertNil(Authority.tenantId(inIssuer: "https://idp.example.com/realms/main"))
    }

    func testHomeTenantReplacesTheAlias() throws {
        let common = try XCTUnwrap(Authority("https://login.microsoftonline.com/common"))
        let home = common.withTenant("22222222-2222-2222-2222-222222222222")
        XCTAssertEqual(home.url, "https://login.microsoftonline.com/22222222-2222-2222-2222-222222222222")
        XCTAssertEqual(home.environment, "login.microsoftonline.com")
        let oidc = try XCTUnwrap(Authority("https://idp.example.com/common"))
        XCTAssertEqual(oidc.withTenant("x"), oidc, "only Entra authorities have tenants")
    }

    /// Another tenant on Microsoft's host, made in place, is the authority its URL parses to.
    func testAnotherTenantIsTheAuthorityItsURLParsesTo() throws {
        let guid = "0A1B2C3D-0000-4000-8000-00000000000F"
        for text in ["https://login.microsoftonline.com/common", "https://login.microsoftonline.com/Organizations/",
                     "https://login.microsoftonline.us/consumers", "https://login.microsoftonline.com:443/common/extra/path",
                     "https://login.microsoftonline.com/contoso.example", "https://login.partner.microsoftonline.cn/common"] {
            let authority = try XCTUnwrap(Authority(text), text)
            let replaced = authority.withTenant(guid)
            let parsed = try XCTUnwrap(Authority(replaced.url), text)
            XCTAssertEqual(replaced, parsed, text)
            XCTAssertEqual(replaced.tenant, guid, text)
        }
        // Not a tenant id: parsed again, whatever it holds.
        let common = try XCTUnwrap(Authority("https://login.microsoftonline.com/common"))
        XCTAssertEqual(common.withTenant("contoso.example"), Authority("https://login.microsoftonline.com/contoso.example"))
    }

    func testClaimsMergeWithCapabilities() throws {
        XCTAssertNil(Claims.merged(challenge: nil, capabilities: []))
        XCTAssertEqual(Claims.merged(challenge: #"{"id_token":{}}"#, capabilities: []), #"{"id_token":{}}"#)
        let onlyCapabilities = try XCTUnwrap(Claims.merged(challenge: nil, capabilities: ["cp1"]))
        XCTAssertEqual(try JSONReader.parse(onlyCapabilities),
                       .object(JSONObject(["access_token": .object(JSONObject(["xms_cc": .object(JSONObject(["values": .array([.string("cp1")])]))]))])))
        let challenge = #"{"access_token":{"nbf":{"essential":true,"value":"1700000000"}}}"#
        let merged = try XCTUnwrap(Claims.merged(challenge: challenge, capabilities: ["cp1", "cp2"]))
        guard case .object(let root) = try JSONReader.parse(merged), let accessToken = root["access_token"]?.objectValue else {
            return XCTFail("not an object: \(merged)")
        }
        XCTAssertNotNil(accessToken["nbf"], "the challenge is kept")
        XCTAssertEqual(accessToken["xms_cc"]?.objectValue?["values"], .array([.string("cp1"), .string("cp2")]))
        XCTAssertEqual(Claims.merged(challenge: "not json", capabilities: ["cp1"]), "not json")
    }

    func testLearnedAliasesReindexTheCache() {
        var cache = TokenCache()
        for host in ["login.one.example", "login.two.example"] {
            var token = CacheEntity()
            token.set("credential_type", "RefreshToken")
            token.set("secret", "fake-rt-\(host)")
            token.set("home_account_id", "uid.utid")
            token.set("environment", host)
            token.set("client_id", "client")
            cache.add(.refreshToken, token)
        }
        XCTAssertEqual(cache.find(.refreshToken, CacheQuery(environment: "login.one.example")).count, 1)
        XCTAssertTrue(cache.learnAliases([["login.one.example", "login.two.example"]]))
        XCTAssertEqual(cache.find(.refreshToken, CacheQuery(environment: "login.one.example")).count, 2)
        XCTAssertEqual(cache.find(.refreshToken, CacheQuery(environment: "LOGIN.TWO.example")).count, 2)
        XCTAssertFalse(cache.learnAliases([["login.one.example", "login.two.example"]]), "a known group changes nothing")
        XCTAssertFalse(cache.learnAliases([["login.microsoftonline.com", "login.windows.net"]]))
    }
}
