import BrokerJSON
import BrokerProtocol
import XCTest

/// A number the JSON reader takes (any literal, `1e400` included) must encode again: accountClaims carry an
/// IdP's id_token claims to every app, and one claim beyond Double's range made every account answer fail with
/// -50000. Found by the json-reader fuzz target.
final class HostileNumberEncodingTests: XCTestCase {
    private struct Holder: Codable { var claims: JSONValue }

    func testNumbersBeyondDoubleEncodeAsTheLargestFiniteDouble() throws {
        let claims = try JSONReader.parse(#"{"big":1e400,"tiny":-1e400,"small":1e-400,"exp":1700000000}"#)
        let text = String(decoding: try JSONValueEncoder().encodeToBytes(Holder(claims: claims)), as: UTF8.self)
        XCTAssertEqual(text, #"{"claims":{"big":1.7976931348623157e+308,"exp":1700000000,"small":0,"tiny":-1.7976931348623157e+308}}"#)
        XCTAssertEqual(try JSONValueEncoder().encode(claims), try JSONValueEncoder().encode(Holder(claims: claims)).objectValue?["claims"])
    }

    /// A zero with a sign is written `0`: as `-0` it was read back as the integer 0 and written `0` the second time.
    func testASignedZeroEncodesAsZeroEveryTime() throws {
        for literal in ["-0E12", "-0.0", "-1e-400", "0.0e5"] {
            let first = try JSONValueEncoder().encodeToBytes(Holder(claims: .number(literal)))
            XCTAssertEqual(String(decoding: first, as: UTF8.self), #"{"claims":0}"#, literal)
            let again = try JSONValueEncoder().encodeToBytes(try JSONValueDecoder().decode(Holder.self, from: first))
            XCTAssertEqual(again, first, literal)
        }
    }

    func testAnAccountWithSuchClaimsEncodes() throws {
        let account = Account(homeAccountId: "fake-hid", username: "", environment: "idp.example", realm: "r",
                              localAccountId: nil, name: nil, authorityType: nil, tenantProfiles: [], apps: [],
                              hiddenFrom: [], signInRequired: false, accountClaims: try JSONReader.parse(#"{"big":1e400}"#))
        XCTAssertNoThrow(try ProtocolCoding.encode(AccountsResult(accounts: [account])))
    }
}
