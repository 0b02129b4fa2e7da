import BrokerJSON
import BrokerProtocol
import BrokerWire
import XCTest

/// `AcquireTokenSilentlyParams(plain:)` against the Codable decoder: whatever it accepts decodes to the same value,
/// and the usual request shapes are accepted.
final class SilentParamsReadingTests: XCTestCase {
    private func same(_ a: AcquireTokenSilentlyParams, _ b: AcquireTokenSilentlyParams) -> Bool {
        a.clientId == b.clientId && a.authority == b.authority && a.scopes == b.scopes && a.resource == b.resource
            && a.account == b.account && a.forceRefresh == b.forceRefresh && a.claims == b.claims
            && a.correlationId == b.correlationId
    }

    func testTheUsualShapesAreReadAsTheDecoderReadsThem() throws {
        let lines = [
            #"{"clientId":"c","authority":"https://login.microsoftonline.com/t","scopes":["User.Read"],"account":{"homeAccountId":"u.t"}}"#,
            #"{"clientId":"c","scopes":["a","b"],"account":"someone@example.com","correlationId":"x","forceRefresh":false}"#,
            #"{"clientId":"c","scopes":[],"account":{"username":"u","homeAccountId":null},"claims":null,"extra":{"n":1}}"#,
            #"{"clientId":"c","scopes":["a"],"resource":"https://r/","account":{"username":"u"},"authority":null}"#,
        ]
        for line in lines {
            let value = try JSONReader.parse(line)
            let plain = try XCTUnwrap(AcquireTokenSilentlyParams(plain: value), line)
            XCTAssertTrue(same(plain, try ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: value)), line)
        }
    }

    func testWhatItAcceptsTheDecoderAcceptsAlike() throws {
        let values: [JSONValue] = [.null, .bool(true), .number("1"), .string("s"), .string(""), .array([]),
                                   .array([.string("a"), .number("2")]), .array([.string("a")]),
                                   .object(JSONObject(["homeAccountId": .string("h")])),
                                   .object(JSONObject(["username": .number("3")])), .object(JSONObject()),
                                   .raw(#""raw""#)]
        let keys = ["clientId", "authority", "scopes", "resource", "account", "forceRefresh", "claims", "correlationId",
                    "other"]
        var seed: UInt64 = 7
        func next() -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(seed >> 33)
        }
        var accepted = 0
        for _ in 0..<20_000 {
            var members: [JSONObject.Member] = [
                .init(key: "clientId", value: .string("c")), .init(key: "scopes", value: .array([.string("a")])),
                .init(key: "account", value: .string("u")),
            ]
            for _ in 0..<(next() % 4) {
                let member = JSONObject.Member(key: keys[next() % keys.count], value: values[next() % values.count])
                if next() % 2 == 0 { members.append(member) } else { members[next() % members.count] = member }
            }
            let params = JSONValue.object(JSONObject(members))
            guard let plain = AcquireTokenSilentlyParams(plain: params) else { continue }
            accepted += 1
            let decoded = try ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: params)
            XCTAssertTrue(same(plain, decoded), "\(params)")
        }
        XCTAssertGreaterThan(accepted, 1_000)  // the comparison ran on many accepted shapes
    }
}
