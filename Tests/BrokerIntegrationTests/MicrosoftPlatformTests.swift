import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// Microsoft identity platform behaviour through the real brokerd against our Entra emulator.
final class MicrosoftPlatformTests: XCTestCase {
    private let common = "https://login.microsoftonline.com/common"

    private func silent(_ daemon: Daemon, client: String, account: String, scopes: [String] = [TestEntra.graph],
                        authority: String? = nil, forceRefresh: Bool = false, claims: String? = nil) async throws -> TokenResult {
        try await BrokerConnection(socketPath: daemon.socket).call(.acquireTokenSilently, AcquireTokenSilentlyParams(
            clientId: client, authority: authority ?? common, scopes: scopes, account: AccountReference(account),
            forceRefresh: forceRefresh ? true : nil, claims: claims), as: TokenResult.self)
    }

    private func errorCode(_ body: () async throws -> Void) async -> Int? {
        do { try await body() } catch let BrokerClientError.rpc(error) { return error.code } catch { return nil }
        return nil
    }

    func testFamilySingleSignOnAndANonFamilyApp() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        let login = try entra.signIn(daemon, user: "alice@contoso.example", client: TestEntra.famA)
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        let signedIn = try decode(TokenResult.self, login.stdout)
        XCTAssertEqual(signedIn.account.homeAccountId, "a1ce0000-0000-4000-8000-000000000001.\(TestEntra.contoso)")
        XCTAssertEqual(signedIn.account.username, "alice@contoso.example")
        XCTAssertEqual(signedIn.account.environment, "login.microsoftonline.com", "the cache keeps the real host")
        let claims = try XCTUnwrap(signedIn.account.accountClaims?.objectValue, "accountClaims from the id_token")
        XCTAssertEqual(claims["oid"], .string("a1ce0000-0000-4000-8000-000000000001"))
        XCTAssertEqual(claims["tid"], .string(TestEntra.contoso))
        XCTAssertEqual(claims["preferred_username"], .string("alice@contoso.example"))

        // Instance discovery was asked about the cloud of the authority.
        let all = try entra.control("/test/requests?limit=500", post: false)["recent"] as? [[String: Any]] ?? []
        XCTAssertTrue(all.contains { ($0["endpoint"] as? String) == "instance_discovery" }, "\(all.map { $0["endpoint"] ?? "" })")

        // Family app B: silent, no user, with A's family refresh token.
        let b = try await silent(daemon, client: TestEntra.famB, account: "alice@contoso.example")
        XCTAssertEqual(b.source, "refresh")
        let redemption = try XCTUnwrap(try entra.tokenRequests().last)
        XCTAssertEqual(redemption["client_id"] as? String, TestEntra.famB)
        XCTAssertEqual(redemption["rt_client_id"] as? String, TestEntra.famA)
        XCTAssertEqual(redemption["tenant"] as? String, TestEntra.contoso, "common means the home tenant in silent requests")

        // Non-family app C: InteractionRequired, and it is recorded as outside the family.
        let code = await errorCode { _ = try await self.silent(daemon, client: TestEntra.nonFamily, account: "alice@contoso.example") }
        XCTAssertEqual(code, -50002)
        let exported = try await BrokerConnection(socketPath: daemon.socket).call(.exportCache, ExportCacheParams(), as: ExportResult.self)
        let root = try JSONSerialization.jsonObject(with: Data(try XCTUnwrap(exported.data).utf8)) as! [String: Any]
        let metadata = (root["AppMetadata"] as? [String: [String: Any]] ?? [:]).values
        let c = try XCTUnwrap(metadata.first { $0["client_id"] as? String == TestEntra.nonFamily })
        XCTAssertNil(c["family_id"], "C is known to be outside the family")
        XCTAssertEqual(metadata.first { $0["client_id"] as? String == TestEntra.famB }?["family_id"] as? String, "1")
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        XCTAssertEqual(status.signInRequired, [], "a family token refused to another app says nothing about the account")

        // A second try of C does not present the family token again.
        let before = try entra.tokenRequests().filter { $0["client_id"] as? String == TestEntra.nonFamily }.count
        _ = await errorCode { _ = try await self.silent(daemon, client: TestEntra.nonFamily, account: "alice@contoso.example") }
        XCTAssertEqual(try entra.tokenRequests().filter { $0["client_id"] as? String == TestEntra.nonFamily }.count, before)

        // Per-app removal of A: B still silent. Sign-out: nobody.
        XCTAssertEqual(try daemon.ctl(["remove", "alice@contoso.example", "--client-id", TestEntra.famA]).status, 0)
        let bAgain = try await silent(daemon, client: TestEntra.famB, account: "alice@contoso.example", forceRefresh: true)
        XCTAssertEqual(bAgain.source, "refresh")
        let aAfterRemoval = await errorCode { _ = try await self.silent(daemon, client: TestEntra.famA, account: "alice@contoso.example") }
        XCTAssertEqual(aAfterRemoval, -50002)
        XCTAssertEqual(try daemon.ctl(["signout", "alice@contoso.example"]).status, 0)
        for client in [TestEntra.famA, TestEntra.famB] {
            let code = await errorCode { _ = try await self.silent(daemon, client: client, account: "alice@contoso.example") }
            XCTAssertEqual(code, -50002, client)
        }
    }

    func testGuestTenantIsOneAccountWithTwoTenants() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: "alice@contoso.example", client: TestEntra.famA).status, 0, daemon.log)
        let guest = try entra.signIn(daemon, user: "alice@contoso.example", client: TestEntra.famA,
                                     authority: "https://login.microsoftonline.com/fabrikam.example")
        XCTAssertEqual(guest.status, 0, guest.stderr)
        let accounts = try decode(AccountsResult.self, try daemon.ctl(["accounts", "--json"]).stdout).accounts
        XCTAssertEqual(accounts.count, 1)
        XCTAssertEqual(Set(accounts[0].tenantProfiles.map(\.realm)), [TestEntra.contoso, TestEntra.fabrikam])
        XCTAssertEqual(accounts[0].realm, TestEntra.contoso, "the home tenant")
        // Each tenant has its own token.
        let inFabrikam = try await silent(daemon, client: TestEntra.famA, account: "alice@contoso.example",
                                          authority: "https://login.microsoftonline.com/\(TestEntra.fabrikam)")
        XCTAssertEqual(inFabrikam.source, "cache")
        let inContoso = try await silent(daemon, client: TestEntra.famA, account: "alice@contoso.example")
        XCTAssertEqual(inContoso.source, "cache")
        XCTAssertNotEqual(inFabrikam.accessToken, inContoso.accessToken)
        // The tenant named by its domain finds the same token (the tenant id comes from its discovery document).
        let byDomain = try await silent(daemon, client: TestEntra.famA, account: "alice@contoso.example",
                                        authority: "https://login.microsoftonline.com/fabrikam.example")
        XCTAssertEqual(byDomain.source, "cache")
        XCTAssertEqual(byDomain.accessToken, inFabrikam.accessToken)
    }

    func testClaimsChallengeGoesToTheTokenEndpointWithCapabilities() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: "bob@contoso.example", client: TestEntra.famA).status, 0, daemon.log)
        let cached = try await silent(daemon, client: TestEntra.famA, account: "bob@contoso.example")
        XCTAssertEqual(cached.source, "cache")
        let challenge = #"{"access_token":{"nbf":{"essential":true,"value":"1700000000"}}}"#
        let challenged = try await silent(daemon, client: TestEntra.famA, account: "bob@contoso.example", claims: challenge)
        XCTAssertEqual(challenged.source, "refresh", "a claims challenge bypasses the cached token")
        let request = try XCTUnwrap(try entra.tokenRequests().last)
        XCTAssertEqual(request["has_claims"] as? Bool, true)
        let sent = try XCTUnwrap(request["claims"])
        let claims = try sent as? String
            ?? String(decoding: JSONSerialization.data(withJSONObject: sent), as: UTF8.self)
        XCTAssertTrue(claims.contains("nbf") && claims.contains("xms_cc") && claims.contains("cp1"), claims)
    }

    func testBadTokenRemovesTheRefreshTokenOtherInvalidGrantKeepsIt() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: "bob@contoso.example", client: TestEntra.nonFamily).status, 0, daemon.log)
        try entra.control("/test/fail-next?error=invalid_grant&suberror=consent_required&error_codes=65001&grant_type=refresh_token")
        do {
            _ = try await silent(daemon, client: TestEntra.nonFamily, account: "bob@contoso.example", forceRefresh: true)
            XCTFail("consent required")
        } catch let BrokerClientError.rpc(error) {
            XCTAssertEqual(error.code, -50002)
            XCTAssertEqual(error.data?.objectValue?["suberror"], .string("consent_required"))
            XCTAssertEqual(error.data?.objectValue?["errorCodes"], .array([.number("65001")]))
        }
        XCTAssertEqual(try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout).refreshTokens, 1)

        try entra.control("/test/fail-next?error=invalid_grant&suberror=bad_token&error_codes=70008&grant_type=refresh_token")
        let code = await errorCode {
            _ = try await self.silent(daemon, client: TestEntra.nonFamily, account: "bob@contoso.example", forceRefresh: true)
        }
        XCTAssertEqual(code, -50002)
        XCTAssertEqual(try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout).refreshTokens, 0,
                       "invalid_grant + bad_token removes the refresh token that was used")
    }

    func testAuthorityValidationRefusesAnUntrustedHost() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        let result = try daemon.ctl(["login", "--client-id", TestEntra.famA, "--authority", "https://login.evil.example/common",
                                     "--scope", TestEntra.graph])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("authority validation failed"), result.stderr)
    }

    func testB2CAndADFSSignIns() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        let b2c = try entra.signIn(daemon, user: "dana@b2c.example", client: TestEntra.famA,
                                   authority: "\(entra.http)/tfp/contosob2c.onmicrosoft.com/B2C_1_signin",
                                   scopes: ["https://contosob2c.onmicrosoft.com/api/read"])
        XCTAssertEqual(b2c.status, 0, b2c.stderr + daemon.log)
        XCTAssertTrue(try decode(TokenResult.self, b2c.stdout).account.homeAccountId.contains("-b2c_1_signin"), b2c.stdout)

        let adfs = try entra.signIn(daemon, user: "frank@corp.example", client: TestEntra.famA, authority: "\(entra.http)/adfs",
                                    scopes: ["https://api.corp.example/read"])
        XCTAssertEqual(adfs.status, 0, adfs.stderr + daemon.log)
        XCTAssertEqual(try decode(TokenResult.self, adfs.stdout).account.username, "frank@corp.example", "from upn")
    }

    func testDefaultScopeWithTheDoubleSlashReachesTheIdPIntact() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        let arm = "https://management.core.windows.net//.default"
        let login = try entra.signIn(daemon, user: "bob@contoso.example", client: TestEntra.famA, scopes: [arm])
        XCTAssertEqual(login.status, 0, login.stderr + daemon.log)
        XCTAssertTrue(try decode(TokenResult.self, login.stdout).grantedScopes.contains("https://management.core.windows.net//user_impersonation"))
        let request = try XCTUnwrap(try entra.tokenRequests().last)
        XCTAssertTrue((request["scope"] as? String ?? "").contains(arm), "\(request)")
    }

    func testAliasInteropWithAnMSALNetStyleCache() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: "bob@contoso.example", client: TestEntra.famA).status, 0, daemon.log)
        let connection = BrokerConnection(socketPath: daemon.socket)
        let exported = try await connection.call(.exportCache, ExportCacheParams(), as: ExportResult.self).data ?? ""
        XCTAssertEqual(try daemon.ctl(["signout", "bob@contoso.example"]).status, 0)

        // The same cache as MSAL.NET writes it: login.windows.net everywhere.
        let windows = exported.replacingOccurrences(of: "login.microsoftonline.com", with: "login.windows.net")
        _ = try await connection.call(.importCache, ImportCacheParams(data: windows), as: ImportResult.self)
        let fromAlias = try await silent(daemon, client: TestEntra.famA, account: "bob@contoso.example")
        XCTAssertEqual(fromAlias.source, "cache", "a login.microsoftonline.com request finds login.windows.net entries")
        // And the reverse: a login.windows.net request finds them too.
        let reverse = try await silent(daemon, client: TestEntra.famA, account: "bob@contoso.example",
                                       authority: "https://login.windows.net/common")
        XCTAssertEqual(reverse.source, "cache")
    }

    /// The mapping table (reference §5): each AADSTS error/suberror row to its code and classification.
    func testEachSuberrorMapsAsMSALDoes() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: "bob@contoso.example", client: TestEntra.nonFamily).status, 0, daemon.log)
        let rows: [(error: String, suberror: String?, status: Int, code: Int, classification: String?)] = [
            ("invalid_grant", "token_expired", 400, -50002, ""),
            ("invalid_grant", "client_mismatch", 400, -50002, ""),
            ("unauthorized_client", "protection_policy_required", 400, -50004, ""),
            ("invalid_grant", "consent_required", 400, -50002, "consent_required"),
            ("interaction_required", "basic_action", 400, -50002, "basic_action"),
            ("interaction_required", "additional_action", 400, -50002, "additional_action"),
            ("invalid_grant", "message_only", 400, -50002, "message_only"),
            ("invalid_grant", "user_password_expired", 400, -50002, "user_password_expired"),
            ("invalid_client", nil, 401, -50006, nil),
            ("invalid_scope", nil, 400, -50006, nil),
            ("server_error", nil, 500, -50006, nil),
            ("invalid_grant", "bad_token", 400, -50002, ""),
        ]
        for row in rows {
            try entra.control("/test/fail-next?error=\(row.error)&status=\(row.status)&grant_type=refresh_token&count=2"
                              + (row.suberror.map { "&suberror=\($0)" } ?? ""))
            do {
                _ = try await silent(daemon, client: TestEntra.nonFamily, account: "bob@contoso.example", forceRefresh: true)
                XCTFail("\(row) did not fail")
            } catch let BrokerClientError.rpc(error) {
                XCTAssertEqual(error.code, row.code, "\(row): \(error)")
                let data = error.data?.objectValue
                if row.status < 500 { XCTAssertEqual(data?["error"], .string(row.error), "\(row)") }
                XCTAssertEqual(data?["classification"]?.stringValue, row.classification, "\(row)")
            }
            try entra.control("/test/reset")
        }
        XCTAssertEqual(try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout).refreshTokens, 0,
                       "only the bad_token row removed the refresh token")
    }

    func testResourceIsAskedForAsDefaultScope() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: "bob@contoso.example", client: TestEntra.famA).status, 0, daemon.log)
        let result = try await BrokerConnection(socketPath: daemon.socket).call(.acquireTokenSilently, AcquireTokenSilentlyParams(
            clientId: TestEntra.famA, authority: common, scopes: [], account: AccountReference("bob@contoso.example"),
            resource: "https://management.core.windows.net/"), as: TokenResult.self)
        XCTAssertTrue(result.grantedScopes.contains("https://management.core.windows.net//user_impersonation"))
        let request = try XCTUnwrap(try entra.tokenRequests().last)
        XCTAssertTrue((request["scope"] as? String ?? "").contains("https://management.core.windows.net//.default"), "\(request)")
    }

    /// A token-endpoint error that carries a claims challenge hands it to the app, which then signs in with it.
    func testClaimsInATokenErrorReachTheCallerAndTheInteractiveRequest() async throws {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: "bob@contoso.example", client: TestEntra.famA).status, 0, daemon.log)
        let challenge = #"{"access_token":{"capolids":{"essential":true,"values":["fake-policy"]}}}"#
        try entra.control("/test/fail-next?error=interaction_required&suberror=basic_action&error_codes=50076"
                          + "&grant_type=refresh_token&claims=" + percentEncoded(challenge))
        var surfaced: String?
        do {
            _ = try await silent(daemon, client: TestEntra.famA, account: "bob@contoso.example", forceRefresh: true)
        } catch let BrokerClientError.rpc(error) {
            XCTAssertEqual(error.code, -50002)
            surfaced = error.data?.objectValue?["claims"]?.stringValue
        }
        XCTAssertEqual(surfaced.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? NSDictionary },
                       try JSONSerialization.jsonObject(with: Data(challenge.utf8)) as? NSDictionary)

        // The app runs the interactive request with the challenge; it reaches the IdP with the capabilities.
        try entra.control("/test/next-signin?username=bob@contoso.example")
        let interactive = try await BrokerConnection(socketPath: daemon.socket).call(
            .acquireTokenInteractively, AcquireTokenInteractivelyParams(clientId: TestEntra.famA, authority: common,
                                                                        scopes: [TestEntra.graph], claims: surfaced),
            as: TokenResult.self, timeoutSeconds: 60) { _, _ in }
        XCTAssertEqual(interactive.source, "interactive")
        let redeemed = try XCTUnwrap(try entra.tokenRequests().last)
        let sent = try XCTUnwrap(redeemed["claims"])
        let text = try sent as? String ?? String(decoding: JSONSerialization.data(withJSONObject: sent), as: UTF8.self)
        XCTAssertTrue(text.contains("capolids") && text.contains("xms_cc"), text)
    }
}

/// Percent-encoding for a query value.
private func percentEncoded(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
}
