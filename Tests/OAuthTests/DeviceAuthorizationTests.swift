import OAuth
import XCTest

/// The device authorization response comes from the IdP, which any app may name: its numbers must not be able to
/// trap the daemon (a 64-bit `interval` once did, in the sleep between polls) or hold a sign-in forever.
final class DeviceAuthorizationTests: XCTestCase {
    private func parse(_ extra: String) throws -> DeviceAuthorization {
        try DeviceAuthorization(Array(#"{"device_code":"d","user_code":"U-1","verification_uri":"https://idp.example/device"\#(extra)}"#.utf8))
    }

    func testNumbersFromTheIdPAreClamped() throws {
        let cases: [(String, Int64, Int64)] = [
            ("", 5, 900),  // RFC 8628 defaults
            (#","interval":9223372036854775807,"expires_in":9223372036854775807"#, 300, 86_400),
            (#","interval":-9223372036854775808,"expires_in":-5"#, 1, 1),
            (#","interval":0,"expires_in":0"#, 1, 1),
            (#","interval":1e300,"expires_in":"1e300""#, 5, 900),  // not an Int64: the default
            (#","interval":"7","expires_in":"600""#, 7, 600),
        ]
        for (extra, interval, expiresIn) in cases {
            let device = try parse(extra)
            XCTAssertEqual(device.interval, interval, extra)
            XCTAssertEqual(device.expiresIn, expiresIn, extra)
        }
    }

    func testAResponseWithoutItsCodesIsAClearError() {
        for body in [#"{}"#, #"{"device_code":"d","user_code":"u"}"#, "not json", #"[1]"#] {
            XCTAssertThrowsError(try DeviceAuthorization(Array(body.utf8)), body) { error in
                guard case OAuthFailure.invalidResponse = error else { return XCTFail("\(error)") }
            }
        }
    }
}
