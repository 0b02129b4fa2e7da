@testable import BrokerCache
import BrokerJSON
import BrokerProtocol
@testable import BrokerServer
import XCTest

/// The account text a cache hit's answer carries (`SocketWire.accountText`, its claims written from their canonical
/// text) against the account the full path encodes (`ProtocolCoding.encode` of `SocketWire.account`, its claims a
/// tree): byte for byte, whatever the id token's payload looks like.
final class AccountTextTests: XCTestCase {
    private func summary(claimsFrom payload: String?) throws -> AccountSummary {
        var summary = AccountSummary(
            homeAccountId: "uid.tid", username: "ada@contoso.example", environment: "login.microsoftonline.com",
            realm: "tid", localAccountId: "uid", name: "Ada", authorityType: "MSSTS",
            tenants: [.init(realm: "tid", environment: "login.microsoftonline.com", localAccountId: "uid", username: "ada")],
            apps: [.init(clientId: "client-a", familyId: "1", hasRefreshToken: true,
                         accessTokens: [.init(scopes: ["mail.read", "user.read"], realm: "tid", expiresOn: 1_795_803_914)])],
            hiddenFrom: ["client-b"], signInRequired: false)
        if let payload {
            summary.accountClaimsText = try JWTPayload.canonicalClaims(of: "eyJhbGciOiJub25lIn0." + Base64URL.encode(Array(payload.utf8)) + ".sig")
        }
        return summary
    }

    func testAHitsAccountTextIsTheAccountTheFullPathEncodes() throws {
        let payloads: [String?] = [
            nil,
            #"{"sub":"s","aud":"client-a","exp":1795803914,"roles":["b","a"]}"#,
            // What Python writes (spaces), unsorted, nested: the fast way.
            #"{ "tid": "tid", "aud": "client-a", "iat": 1795800000, "groups": [ "g2", "g1" ], "xms": { "b": true, "a": null } }"#,
            // What the tree has to take: a name with an escape and one without, a float, a key twice, `-0`, `1e400`.
            #"{"name":"Jos\u00e9","given_name":"Zoë","nbf":1.0,"sub":"first","sub":"second","x":-0,"big":1e400}"#,
        ]
        for payload in payloads {
            let summary = try summary(claimsFrom: payload)
            let text = try XCTUnwrap(SocketWire.accountText(summary), payload ?? "no claims")
            let encoded = try ProtocolCoding.encode(SocketWire.account(summary))
            XCTAssertEqual(String(decoding: text, as: UTF8.self), String(decoding: encoded, as: UTF8.self), payload ?? "no claims")
            XCTAssertEqual(summary.accountClaims == nil, payload == nil)
        }
        let sorted = try XCTUnwrap(SocketWire.accountText(try summary(claimsFrom: #"{"b": 2, "a": [1, "x"]}"#)))
        XCTAssertTrue(String(decoding: sorted, as: UTF8.self).hasPrefix(#"{"accountClaims":{"a":[1,"x"],"b":2},"apps":"#))
    }
}
