@testable import BrokerCore
@testable import BrokerDBus
import BrokerJSON
import Foundation
import XCTest

/// broker1's answer to a cache hit, written directly (`tokenResponseText`), against the JSON it stands for
/// (`tokenResponse` written by JSONWriter): the same bytes, or the same refusal when the id token cannot serve.
final class TokenResponseTextTests: XCTestCase {
    private static func jwt(_ payload: String) -> String {
        let encoded = Data(payload.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJub25lIn0.\(encoded).sig"
    }

    private func outcome(accessToken: String, idToken: String?, hid: String, expiresOn: Int64, extended: Int64) -> TokenOutcome {
        TokenOutcome(accessToken: accessToken, tokenType: "Bearer", expiresOn: expiresOn, extendedExpiresOn: extended,
                     refreshOn: nil, grantedScopes: ["User.Read"], idToken: idToken, homeAccountId: hid,
                     authority: "https://login.microsoftonline.com/t", source: "cache")
    }

    func testDirectTextIsTheEncodedResponse() throws {
        var generator = SystemRandomNumberGenerator()
        let odd = ["", "plain", "quote\"and\\back", "line\nbreak\t", "é ü 漢字", "\u{01}\u{1F}", "/slash/"]
        for round in 0..<500 {
            let username = "user\(round)@example.com"
            let idToken = Self.jwt(#"{"preferred_username":"\#(username)","tid":"t"}"#)
            let times: [Int64] = [0, 1_795_714_977, -5, .max, .min, Int64.random(in: .min ... .max, using: &generator)]
            let given = outcome(accessToken: odd.randomElement()! + "eyJ.\(round)." + odd.randomElement()!, idToken: idToken,
                                hid: "uid\(round).utid\(round % 7)", expiresOn: times.randomElement()!,
                                extended: times.randomElement()!)
            let correlationId = odd.randomElement()! + UUID().uuidString
            let direct = Broker1Methods.tokenResponseText(given, correlationId: correlationId, preferredUsername: username)
            let encoded = JSONWriter().string(Broker1Methods.tokenResponse(given, correlationId: correlationId))
            XCTAssertEqual(direct, encoded, "round \(round)")
            // What the front end keeps of it answers a later call with that call's correlation id.
            var again = try XCTUnwrap(Broker1Methods.tokenResponseHead(given, preferredUsername: username), "round \(round)")
            if JSONWriter.needsNoEscape(given.accessToken), JSONWriter.needsNoEscape(idToken) {
                XCTAssertEqual(Broker1Methods.tokenResponseHead(given, preferredUsername: username, tokensNeedNoEscape: true),
                               again, "round \(round): tokens copied as they are")
            }
            let later = odd.randomElement()! + UUID().uuidString
            Broker1Methods.finishTokenResponse(&again, correlationId: later)
            XCTAssertEqual(String(decoding: again, as: UTF8.self),
                           JSONWriter().string(Broker1Methods.tokenResponse(given, correlationId: later)), "round \(round)")
            XCTAssertNotNil(try? JSONReader.parse(direct), "round \(round): not JSON")
        }
    }

    /// client_info, written directly, is the base64url of what the encoder writes for {"uid":…,"utid":…}.
    func testClientInfoIsTheEncodedObject() throws {
        for (uid, utid) in [("a1ce0000-0000-4000-8000-000000000001", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
                            ("u\"q", "t\\b"), ("ü", "\u{7}x"), ("1", "2")] {
            let ids = try XCTUnwrap(HomeAccountId("\(uid).\(utid)"))
            XCTAssertEqual(ids.clientInfo,
                           Base64URL.encode(JSONWriter().bytes(.object(JSONObject(["uid": .string(uid), "utid": .string(utid)])))))
        }
        XCTAssertNil(HomeAccountId("no-dot"))
        XCTAssertNil(HomeAccountId("a.b.c"))
        XCTAssertNil(HomeAccountId(".b"))
    }

    /// Without the claim from the cache, or when the answer is a refusal, the text is the encoder's.
    func testWithoutTheClaimTheResponseDecides() throws {
        let noUsername = Self.jwt(#"{"name":"someone"}"#)
        let cases: [(TokenOutcome, String?)] = [
            (outcome(accessToken: "at", idToken: noUsername, hid: "uid.utid", expiresOn: 1, extended: 2), nil),
            (outcome(accessToken: "at", idToken: noUsername, hid: "uid.utid", expiresOn: 1, extended: 2), ""),
            (outcome(accessToken: "at", idToken: nil, hid: "uid.utid", expiresOn: 1, extended: 2), "user@example.com"),
            (outcome(accessToken: "at", idToken: Self.jwt(#"{"preferred_username":"u@example.com"}"#), hid: "not-entra",
                     expiresOn: 1, extended: 2), "u@example.com"),
        ]
        for (index, (given, username)) in cases.enumerated() {
            let direct = Broker1Methods.tokenResponseText(given, correlationId: "c", preferredUsername: username)
            XCTAssertEqual(direct, JSONWriter().string(Broker1Methods.tokenResponse(given, correlationId: "c")), "case \(index)")
            XCTAssertTrue(direct.contains("\"error\""), "case \(index) should be a refusal: \(direct)")
        }
    }
}
