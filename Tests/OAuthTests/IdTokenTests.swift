import BrokerJSON
import Foundation
import XCTest
@testable import OAuth

final class JWTPayloadTests: XCTestCase {
    func testClaimsOfAWellFormedToken() throws {
        let token = TestJWT.make(["iss": #""https://idp.example/""#, "exp": "1700003600", "name": #""Zoë""#])
        let claims = try JWTPayload.claims(of: token)
        XCTAssertEqual(claims["iss"]?.stringValue, "https://idp.example/")
        XCTAssertEqual(claims["exp"]?.integerValue, 1_700_003_600)
        XCTAssertEqual(claims["name"]?.stringValue, "Zoë")
        XCTAssertEqual(claims.keys, ["iss", "exp", "name"])
    }

    func testAnEmptySignatureIsStillThreeParts() throws {
        // An unsecured JWT (alg none) has an empty third part.
        let token = TestJWT.base64url(#"{"alg":"none"}"#) + "." + TestJWT.base64url(#"{"sub":"fake-sub"}"#) + "."
        XCTAssertEqual(try JWTPayload.claims(of: token)["sub"]?.stringValue, "fake-sub")
    }

    func testPaddedStandardBase64PayloadIsAccepted() throws {
        // {"a":"?>?"} is "eyJhIjoiPz4/In0=" in standard base64: '/' and padding, as some encoders send it.
        let payload = Data(#"{"a":"?>?"}"#.utf8).base64EncodedString()
        XCTAssertEqual(payload, "eyJhIjoiPz4/In0=")
        let claims = try JWTPayload.claims(of: "e30." + payload + ".fake-signature")
        XCTAssertEqual(claims["a"]?.stringValue, "?>?")
    }

    func testNotAJWT() {
        for text in ["", "fake-token", "a.b", "a.b.c.d", "a.b.c.d.e"] {
            XCTAssertThrowsError(try JWTPayload.claims(of: text), text) { error in
                XCTAssertEqual(error as? JWTPayload.Failure, .notAJWT, text)
            }
        }
    }

    func testBadPayload() {
        let header = TestJWT.base64url(#"{"alg":"none"}"#)
        for payload in ["", "!!!!", TestJWT.base64url("not json"), TestJWT.base64url("[1,2]"),
                        TestJWT.base64url(#""a string""#), TestJWT.base64url(#"{"unterminated":"#)] {
            XCTAssertThrowsError(try JWTPayload.claims(of: header + "." + payload + ".sig"), payload) { error in
                XCTAssertEqual(error as? JWTPayload.Failure, .badPayload, payload)
            }
        }
    }
}

final class IdTokenTests: XCTestCase {
    private let now: Int64 = 1_700_000_000
    private let issuer = "https://login.example.com/fake-tenant/v2.0"
    private let client = "fake-client-id"

    /// A valid token for `client` issued by `issuer` at `now`, with `overrides` replacing or adding claims
    /// (a nil value removes the claim).
    private func token(_ overrides: [String: String?] = [:]) -> String {
        var claims: [(String, String)] = [
            ("iss", "\"\(issuer)\""), ("aud", "\"\(client)\""), ("sub", #""fake-subject""#),
            ("oid", #""fake-oid""#), ("tid", #""fake-tenant""#), ("iat", "\(now - 60)"), ("nbf", "\(now - 60)"),
            ("exp", "\(now + 3540)"), ("nonce", #""fake-nonce""#), ("name", #""Test User""#),
            ("preferred_username", #""user@example.com""#),
        ]
        for (key, value) in overrides {
            claims.removeAll { $0.0 == key }
            if let value { claims.append((key, value)) }
        }
        return TestJWT.make(payload: "{" + claims.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    }

    private func validate(_ raw: String, issuer expected: String? = nil, nonce: String? = "fake-nonce",
                          now: Int64? = nil) throws(OAuthFailure) {
        try IdToken(raw: raw).validate(issuer: expected ?? issuer, clientId: client, nonce: nonce, now: now ?? self.now)
    }

    func testClaimAccessors() throws {
        let idToken = try IdToken(raw: token())
        XCTAssertEqual(idToken.raw, token())
        XCTAssertEqual(idToken.issuer, issuer)
        XCTAssertEqual(idToken.subject, "fake-subject")
        XCTAssertEqual(idToken.objectId, "fake-oid")
        XCTAssertEqual(idToken.tenantId, "fake-tenant")
        XCTAssertEqual(idToken.name, "Test User")
        XCTAssertEqual(idToken.username, "user@example.com")
        XCTAssertEqual(idToken.audiences, [client])
    }

    func testUsernameFallsBackToUpnThenEmail() throws {
        let upn = try IdToken(raw: token(["preferred_username": nil, "upn": #""upn@example.com""#,
                                          "email": #""mail@example.com""#]))
        XCTAssertEqual(upn.username, "upn@example.com")
        let email = try IdToken(raw: token(["preferred_username": nil, "email": #""mail@example.com""#]))
        XCTAssertEqual(email.username, "mail@example.com")
        let none = try IdToken(raw: token(["preferred_username": nil]))
        XCTAssertNil(none.username)
        let preferred = try IdToken(raw: token(["upn": #""upn@example.com""#]))
        XCTAssertEqual(preferred.username, "user@example.com", "preferred_username wins over upn")
    }

    func testUserInfoClaimsHaveNoRaw() {
        let info = IdToken(userInfo: JSONObject(["sub": .string("fake-sub"), "email": .string("mail@example.com")]))
        XCTAssertNil(info.raw)
        XCTAssertEqual(info.subject, "fake-sub")
        XCTAssertEqual(info.username, "mail@example.com")
    }

    func testValidTokenIsAccepted() throws {
        try validate(token())
        try validate(token(), nonce: nil)
        try validate(token(), issuer: issuer + "/")
        try validate(token(["iss": "\"\(issuer)/\""]))
        try validate(token(["nonce": nil]), nonce: nil)
        try validate(token(["iat": nil]), nonce: nil)
    }

    func testWrongIssuerIsRejected() {
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["iss": #""https://evil.example/v2.0""#])) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["iss": nil])) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in
            try validate(token(["iss": "\"\(issuer.uppercased())\""]))
        }
    }

    func testAudience() throws {
        try validate(token(["aud": "[\"fake-other\",\"\(client)\"]"]))
        XCTAssertEqual(try IdToken(raw: token(["aud": "[\"a\",\"\(client)\"]"])).audiences, ["a", client])
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["aud": nil])) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["aud": #""fake-other""#])) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["aud": #"["fake-other"]"#])) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["aud": "[]"])) }
    }

    func testExpiryWithSkew() throws {
        let exp = now + 3540
        try validate(token(), now: exp + 299)  // within the default 300 s skew
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(), now: exp + 301) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["exp": "\(now - 3600)"])) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["exp": nil])) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["exp": #""soon""#])) }
        // exp as a string of digits reads like a number.
        try validate(token(["exp": "\"\(now + 60)\""]))
    }

    func testIssuedInTheFuture() throws {
        try validate(token(["iat": "\(now + 299)"]))
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["iat": "\(now + 301)"])) }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["iat": "\(now + 86400)"])) }
    }

    func testNonce() {
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(), nonce: "fake-other-nonce") }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["nonce": nil]), nonce: "fake-nonce") }
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["nonce": "42"]), nonce: "42") }
    }

    func testMultiTenantIssuerTemplate() throws {
        let template = "https://login.example.com/{tenantid}/v2.0"
        try validate(token(), issuer: template)
        // The template stands for this token's tid, not for any tenant.
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in
            try validate(token(["iss": #""https://login.example.com/other-tenant/v2.0""#]), issuer: template)
        }
        // Without tid the template cannot match.
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in try validate(token(["tid": nil]), issuer: template) }
    }

    /// `{tenantid}` is a placeholder for the token's tid: with no tid there is nothing to substitute, so no iss can
    /// match — not even one that spells the placeholder literally.
    func testLiteralTemplateIssuerWithoutTidIsRejected() {
        let template = "https://login.example.com/{tenantid}/v2.0"
        assertOAuthFailure("idToken") { () throws(OAuthFailure) in
            try validate(token(["tid": nil, "iss": "\"\(template)\""]), issuer: template)
        }
    }

    func testNotAJWTAndBadPayloadBecomeIdTokenFailures() {
        let first = assertOAuthFailure("idToken") { () throws(OAuthFailure) in _ = try IdToken(raw: "fake-opaque-token") }
        XCTAssertEqual(first, .idToken(JWTPayload.Failure.notAJWT.description))
        let second = assertOAuthFailure("idToken") { () throws(OAuthFailure) in
            _ = try IdToken(raw: "e30." + TestJWT.base64url("[]") + ".sig")
        }
        XCTAssertEqual(second, .idToken(JWTPayload.Failure.badPayload.description))
    }
}

final class ClientInfoTests: XCTestCase {
    func testDecode() throws {
        let encoded = TestJWT.base64url(#"{"uid":"Fake-UID-0001","utid":"Fake-TENANT-0002"}"#)
        let info = try XCTUnwrap(ClientInfo(encoded: encoded))
        XCTAssertEqual(info.uid, "Fake-UID-0001")
        XCTAssertEqual(info.utid, "Fake-TENANT-0002")
        XCTAssertEqual(info.homeAccountId, "fake-uid-0001.fake-tenant-0002")
    }

    func testPaddedStandardBase64IsAccepted() throws {
        let text = #"{"uid":"fake-uid>>?","utid":"fake-utid"}"#
        let encoded = Data(text.utf8).base64EncodedString()
        XCTAssertTrue(encoded.contains("=") && encoded.contains("+"), encoded)
        XCTAssertEqual(ClientInfo(encoded: encoded)?.uid, "fake-uid>>?")
    }

    func testInvalidInput() {
        XCTAssertNil(ClientInfo(encoded: ""))
        XCTAssertNil(ClientInfo(encoded: "not base64!"))
        XCTAssertNil(ClientInfo(encoded: TestJWT.base64url("not json")))
        XCTAssertNil(ClientInfo(encoded: TestJWT.base64url(#"{"uid":"fake-uid"}"#)), "utid missing")
        XCTAssertNil(ClientInfo(encoded: TestJWT.base64url(#"{"utid":"fake-utid"}"#)), "uid missing")
        XCTAssertNil(ClientInfo(encoded: TestJWT.base64url(#"{"uid":1,"utid":"fake-utid"}"#)), "uid not a string")
        XCTAssertNil(ClientInfo(encoded: TestJWT.base64url(#"["fake-uid","fake-utid"]"#)))
    }
}
