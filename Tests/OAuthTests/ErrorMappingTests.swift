import XCTest
@testable import BrokerCache
@testable import BrokerCore
@testable import OAuth

final class OAuthErrorResponseTests: XCTestCase {
    private let entraBody = """
        {"error":"invalid_grant","error_description":"AADSTS50076: Due to a configuration change made by your \
        administrator, you must use multi-factor authentication.","error_codes":[50076],"timestamp":"2024-01-01 00:00:00Z",\
        "trace_id":"fake-trace-0001","correlation_id":"fake-correlation-0002","suberror":"basic_action",\
        "claims":"{\\"access_token\\":{\\"capolids\\":{\\"essential\\":true,\\"values\\":[\\"fake-policy\\"]}}}"}
        """

    func testFullEntraBody() throws {
        let response = try XCTUnwrap(OAuthErrorResponse(json: bytes(entraBody), httpStatus: 400))
        XCTAssertEqual(response.error, "invalid_grant")
        XCTAssertEqual(response.errorDescription?.hasPrefix("AADSTS50076: Due to a configuration change"), true)
        XCTAssertEqual(response.errorCodes, [50076])
        XCTAssertEqual(response.suberror, "basic_action")
        XCTAssertEqual(response.claims, #"{"access_token":{"capolids":{"essential":true,"values":["fake-policy"]}}}"#)
        XCTAssertEqual(response.correlationId, "fake-correlation-0002")
        XCTAssertEqual(response.traceId, "fake-trace-0001")
        XCTAssertEqual(response.httpStatus, 400)
        XCTAssertTrue(response.description.hasPrefix("invalid_grant (basic_action): AADSTS50076"), response.description)
    }

    func testMinimalBody() throws {
        let response = try XCTUnwrap(OAuthErrorResponse(json: bytes(#"{"error":"invalid_client"}"#), httpStatus: 401))
        XCTAssertEqual(response, OAuthErrorResponse(error: "invalid_client", httpStatus: 401))
        XCTAssertEqual(response.description, "invalid_client")
    }

    func testErrorCodesKeepOnlyIntegers() throws {
        let body = #"{"error":"invalid_request","error_codes":[90014,"x",null,700016]}"#
        XCTAssertEqual(OAuthErrorResponse(json: bytes(body), httpStatus: 400)?.errorCodes, [90014, 700016])
    }

    func testNotAnErrorBody() {
        for body in ["", "<html><body>Bad Request</body></html>", "Too Many Requests", "[]", #""invalid_grant""#,
                     #"{"error_description":"no error member"}"#, #"{"error":42}"#, #"{"error":null}"#, "{"] {
            XCTAssertNil(OAuthErrorResponse(json: bytes(body), httpStatus: 400), body)
        }
    }
}

final class TokenClientFailureTests: XCTestCase {
    private func failure(_ status: Int, _ body: String = "") -> OAuthFailure {
        TokenClient.failure(HTTPTransport.Response(status: status, body: bytes(body), headers: []))
    }

    func testOAuthErrorIsAVerdict() {
        let result = failure(400, #"{"error":"invalid_grant","error_codes":[70008],"suberror":"bad_token"}"#)
        guard case .oauth(let response) = result else { return XCTFail("expected .oauth, got \(result)") }
        XCTAssertEqual(response.error, "invalid_grant")
        XCTAssertEqual(response.errorCodes, [70008])
        XCTAssertEqual(response.suberror, "bad_token")
        XCTAssertEqual(response.httpStatus, 400)
        XCTAssertEqual(kind(failure(401, #"{"error":"invalid_client"}"#)), "oauth")
        XCTAssertEqual(kind(failure(400, #"{"error":"authorization_pending"}"#)), "oauth", "device-flow polling")
    }

    func testTransientConditions() {
        XCTAssertEqual(kind(failure(503)), "transient")
        XCTAssertEqual(kind(failure(502, "<html>Bad Gateway</html>")), "transient")
        XCTAssertEqual(kind(failure(500, #"{"error":"server_error"}"#)), "transient")
        XCTAssertEqual(kind(failure(503, #"{"error":"server_error"}"#)), "transient")
        XCTAssertEqual(kind(failure(429)), "transient")
        XCTAssertEqual(kind(failure(429, "Too Many Requests")), "transient")
        XCTAssertEqual(kind(failure(400, #"{"error":"temporarily_unavailable"}"#)), "transient")
        XCTAssertEqual(kind(failure(503, #"{"error":"temporarily_unavailable"}"#)), "transient")
    }

    func testServerErrorBelow500IsNotTransient() {
        // server_error on a 4xx is still an OAuth verdict (only a 5xx status makes it transient).
        XCTAssertEqual(kind(failure(400, #"{"error":"server_error"}"#)), "oauth")
    }

    func testNonOAuthBodiesAreInvalidResponses() {
        XCTAssertEqual(kind(failure(400, "<html><body>Bad Request</body></html>")), "invalidResponse")
        XCTAssertEqual(kind(failure(404)), "invalidResponse")
        XCTAssertEqual(kind(failure(302, "")), "invalidResponse")
        XCTAssertEqual(kind(failure(400, #"{"message":"nope"}"#)), "invalidResponse")
    }
}

final class TokenResponseTests: XCTestCase {
    func testFullResponse() throws {
        let body = """
            {"token_type":"Bearer","scope":"User.Read profile openid email","expires_in":4212,"ext_expires_in":"8424",\
            "refresh_in":2106,"access_token":"fake-access-token","refresh_token":"fake-refresh-token",\
            "id_token":"fake-id-token","client_info":"fake-client-info","foci":"1"}
            """
        let response = try TokenResponse(json: bytes(body))
        XCTAssertEqual(response.accessToken, "fake-access-token")
        XCTAssertEqual(response.tokenType, "Bearer")
        XCTAssertEqual(response.expiresIn, 4212)
        XCTAssertEqual(response.extExpiresIn, 8424)
        XCTAssertEqual(response.refreshIn, 2106)
        XCTAssertEqual(response.refreshToken, "fake-refresh-token")
        XCTAssertEqual(response.idToken, "fake-id-token")
        XCTAssertEqual(response.scope, "User.Read profile openid email")
        XCTAssertEqual(response.clientInfo, "fake-client-info")
        XCTAssertEqual(response.familyId, "1")
    }

    func testDefaults() throws {
        let response = try TokenResponse(json: bytes(#"{"access_token":"fake-access-token"}"#))
        XCTAssertEqual(response.tokenType, "Bearer")
        XCTAssertEqual(response.expiresIn, 3600)
        XCTAssertNil(response.extExpiresIn)
        XCTAssertNil(response.refreshIn)
        XCTAssertNil(response.refreshToken)
        XCTAssertNil(response.idToken)
        XCTAssertNil(response.scope)
        XCTAssertNil(response.clientInfo)
        XCTAssertNil(response.familyId)
    }

    func testExpiresInAsString() throws {
        XCTAssertEqual(try TokenResponse(json: bytes(#"{"access_token":"fake-at","expires_in":"3599"}"#)).expiresIn, 3599)
        XCTAssertEqual(try TokenResponse(json: bytes(#"{"access_token":"fake-at","token_type":"pop"}"#)).tokenType, "pop")
    }

    func testMissingOrEmptyAccessTokenIsInvalid() {
        for body in [#"{"token_type":"Bearer","expires_in":3600}"#, #"{"access_token":""}"#, #"{"access_token":7}"#,
                     "", "not json", "[]", #"{"error":"invalid_grant"}"#] {
            assertOAuthFailure("invalidResponse") { () throws(OAuthFailure) in _ = try TokenResponse(json: bytes(body)) }
        }
    }
}

final class ProviderMetadataTests: XCTestCase {
    private let source = "https://idp.example/fake-tenant/v2.0/.well-known/openid-configuration"

    func testFullDocument() throws {
        let body = """
            {"issuer":"https://idp.example/{tenantid}/v2.0","authorization_endpoint":"https://idp.example/authorize",\
            "token_endpoint":"https://idp.example/token","device_authorization_endpoint":"https://idp.example/devicecode",\
            "jwks_uri":"https://idp.example/keys","revocation_endpoint":"https://idp.example/revoke",\
            "userinfo_endpoint":"https://idp.example/userinfo","response_types_supported":["code"]}
            """
        let metadata = try ProviderMetadata(json: bytes(body), source: source)
        XCTAssertEqual(metadata, ProviderMetadata(
            issuer: "https://idp.example/{tenantid}/v2.0", authorizationEndpoint: "https://idp.example/authorize",
            tokenEndpoint: "https://idp.example/token", deviceAuthorizationEndpoint: "https://idp.example/devicecode",
            jwksURI: "https://idp.example/keys", revocationEndpoint: "https://idp.example/revoke",
            userinfoEndpoint: "https://idp.example/userinfo"))
    }

    func testOptionalEndpointsMayBeAbsent() throws {
        let body = #"{"issuer":"https://idp.example","authorization_endpoint":"https://idp.example/a","token_endpoint":"https://idp.example/t"}"#
        let metadata = try ProviderMetadata(json: bytes(body), source: source)
        XCTAssertEqual(metadata.tokenEndpoint, "https://idp.example/t")
        XCTAssertNil(metadata.deviceAuthorizationEndpoint)
        XCTAssertNil(metadata.userinfoEndpoint)
        XCTAssertNil(metadata.jwksURI)
        XCTAssertNil(metadata.revocationEndpoint)
    }

    func testRequiredMembers() {
        let complete = ["issuer": "https://idp.example", "authorization_endpoint": "https://idp.example/a",
                        "token_endpoint": "https://idp.example/t"]
        for name in complete.keys.sorted() {
            for replacement in [nil, "\"\"", "17"] as [String?] {
                let members = complete.map { key, value -> String? in
                    if key != name { return "\"\(key)\":\"\(value)\"" }
                    return replacement.map { "\"\(key)\":\($0)" }
                }.compactMap { $0 }
                let body = "{" + members.joined(separator: ",") + "}"
                let failure = assertOAuthFailure("invalidResponse") { () throws(OAuthFailure) in
                    _ = try ProviderMetadata(json: bytes(body), source: source)
                }
                if case .invalidResponse(let why)? = failure {
                    XCTAssertTrue(why.contains(name) && why.contains(source), why)
                }
            }
        }
    }

    func testNotAJSONObject() {
        for body in ["", "<html></html>", "[]", "null"] {
            assertOAuthFailure("invalidResponse") { () throws(OAuthFailure) in
                _ = try ProviderMetadata(json: bytes(body), source: source)
            }
        }
    }
}

final class TokenFailureMappingTests: XCTestCase {
    private func oauth(_ error: String, suberror: String? = nil) -> OAuthErrorResponse {
        OAuthErrorResponse(error: error, errorDescription: "fake description", errorCodes: [50000], suberror: suberror,
                           correlationId: "fake-correlation", httpStatus: 400)
    }

    func testRefreshInvalidGrantNeedsInteraction() {
        let response = oauth("invalid_grant", suberror: "basic_action")
        let mapped = TokenFailure.fromRefresh(.oauth(response))
        guard case .interactionRequired(_, let carried) = mapped else { return XCTFail("got \(mapped)") }
        XCTAssertEqual(carried, IdPError(response))
        XCTAssertEqual(mapped.oauth, IdPError(response))
        // Any other OAuth error (MSAL: recoverable by user interaction) also needs interaction.
        for error in ["interaction_required", "consent_required", "invalid_request", "unauthorized_client"] {
            guard case .interactionRequired = TokenFailure.fromRefresh(.oauth(oauth(error))) else {
                return XCTFail("\(error) should need interaction")
            }
        }
    }

    func testRefreshInvalidScopeOrClientIsAServerError() {
        for error in ["invalid_scope", "invalid_client"] {
            let response = oauth(error)
            let mapped = TokenFailure.fromRefresh(.oauth(response))
            guard case .serverError(_, let carried) = mapped else { return XCTFail("\(error): got \(mapped)") }
            XCTAssertEqual(carried, IdPError(response))
        }
    }

    func testRefreshProtectionPolicy() {
        let response = oauth("invalid_grant", suberror: "protection_policy_required")
        XCTAssertEqual(TokenFailure.fromRefresh(.oauth(response)), .protectionPoliciesRequired(IdPError(response)))
        XCTAssertEqual(TokenFailure.fromRefresh(.oauth(response)).oauth, IdPError(response))
    }

    func testRefreshTransientAndOtherFailures() {
        XCTAssertEqual(TokenFailure.fromRefresh(.transient("HTTP 503")), .unavailable("HTTP 503"))
        XCTAssertNil(TokenFailure.fromRefresh(.transient("HTTP 503")).oauth)
        for failure: OAuthFailure in [.invalidResponse("fake"), .configuration("fake"), .idToken("fake")] {
            guard case .serverError(_, nil) = TokenFailure.fromRefresh(failure) else {
                return XCTFail("\(failure) should be a serverError without OAuth detail")
            }
        }
    }

    func testInteractive() {
        guard case .userCanceled = TokenFailure.fromInteractive(.oauth(oauth("access_denied"))) else {
            return XCTFail("access_denied is the user declining")
        }
        let protection = oauth("invalid_grant", suberror: "protection_policy_required")
        XCTAssertEqual(TokenFailure.fromInteractive(.oauth(protection)), .protectionPoliciesRequired(IdPError(protection)))
        let invalidGrant = oauth("invalid_grant")
        guard case .serverError(_, let carried) = TokenFailure.fromInteractive(.oauth(invalidGrant)) else {
            return XCTFail("an interactive refusal is a serverError")
        }
        XCTAssertEqual(carried, IdPError(invalidGrant))
        XCTAssertEqual(TokenFailure.fromInteractive(.transient("down")), .unavailable("down"))
        guard case .invalidRequest(_, let reason) = TokenFailure.fromInteractive(.configuration("http://x is not https")) else {
            return XCTFail("a configuration failure is an invalid request")
        }
        XCTAssertEqual(reason, .invalidAuthority)
        guard case .serverError(_, nil) = TokenFailure.fromInteractive(.idToken("nonce")) else {
            return XCTFail("an id_token failure is a serverError")
        }
    }
}
