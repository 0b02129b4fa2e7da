import BrokerJSON
import XCTest
@testable import OAuth

/// Token responses come from any IdP an app names: their numbers and shapes must not trap the daemon or make a
/// cached token live for ever.
final class HostileAnswerTests: XCTestCase {
    private func lifetimes(_ members: String) throws -> (Int64, Int64?, Int64?) {
        let response = try TokenResponse(json: Array(#"{"access_token":"fake-at",\#(members)}"#.utf8))
        return (response.expiresIn, response.extExpiresIn, response.refreshIn)
    }

    func testLifetimesAreClampedToTenYears() throws {
        let max = TokenResponse.maxLifetimeSeconds
        XCTAssertEqual(max, 10 * 365 * 86_400)
        let (expires, ext, refresh) = try lifetimes(#""expires_in":9223372036854775807,"ext_expires_in":"4e18","refresh_in":315360001"#)
        XCTAssertEqual(expires, max)
        XCTAssertEqual(ext, max)
        XCTAssertEqual(refresh, max)
    }

    func testNegativeLifetimesAreExpired() throws {
        let (expires, ext, refresh) = try lifetimes(#""expires_in":-9223372036854775808,"ext_expires_in":-1,"refresh_in":"-5""#)
        XCTAssertEqual(expires, 0)
        XCTAssertEqual(ext, 0)
        XCTAssertEqual(refresh, 0)
    }

    func testNumbersBeyondInt64CountAsAbsent() throws {
        // 1e300 and thirty nines are no Int64: as if the IdP had not sent them (an hour, for expires_in).
        let (expires, ext, refresh) = try lifetimes(#""expires_in":1e300,"ext_expires_in":-1e400,"refresh_in":"999999999999999999999999999999""#)
        XCTAssertEqual(expires, 3600)
        XCTAssertNil(ext)
        XCTAssertNil(refresh)
    }

    func testDeeplyNestedBodiesAreRefusedNotRecursedInto() {
        let deep = Array(String(repeating: "[", count: 100_000).utf8) + Array(String(repeating: "]", count: 100_000).utf8)
        let deepObject = Array((String(repeating: #"{"access_token":"#, count: 100_000) + "1"
            + String(repeating: "}", count: 100_000)).utf8)
        for body in [deep, deepObject] {
            assertOAuthFailure("invalidResponse") { () throws(OAuthFailure) in _ = try TokenResponse(json: body) }
            assertOAuthFailure("invalidResponse") { () throws(OAuthFailure) in _ = try DeviceAuthorization(body) }
            assertOAuthFailure("invalidResponse") { () throws(OAuthFailure) in
                _ = try ProviderMetadata(json: body, source: "https://idp.example")
            }
            XCTAssertNil(OAuthErrorResponse(json: body, httpStatus: 400))
            XCTAssertNil(ClientInfo(encoded: Base64URL.encode(body)))
            XCTAssertThrowsError(try IdToken(raw: "e30." + Base64URL.encode(body) + ".c2ln"))
        }
    }
}
