import BrokerJSON
import BrokerProtocol
import BrokerWire
import XCTest

/// The one-pass reading of a silent request (`SilentRequestLine`, `AcquireTokenSilentlyParams(reading:)`) against the
/// usual parse (`RPCEnvelope.parse`) and the Codable decoder: whatever it accepts parses and decodes to the same
/// request, and the usual request shapes are accepted.
final class SilentParamsReadingTests: XCTestCase {
    private func same(_ a: AcquireTokenSilentlyParams, _ b: AcquireTokenSilentlyParams) -> Bool {
        a.clientId == b.clientId && a.authority == b.authority && a.scopes == b.scopes && a.resource == b.resource
            && a.account == b.account && a.forceRefresh == b.forceRefresh && a.claims == b.claims
            && a.correlationId == b.correlationId
    }

    private func read(_ params: JSONValue) throws -> AcquireTokenSilentlyParams? {
        var reader = JSONReader(JSONWriter().bytes(params))
        guard try reader.peekKind() == .object else { return nil }
        return try AcquireTokenSilentlyParams(reading: &reader)
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
            let plain = try XCTUnwrap(try read(value), line)
            XCTAssertTrue(same(plain, try ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: value)), line)
        }
    }

    func testWhatItAcceptsTheDecoderAcceptsAlike() throws {
        let values: [JSONValue] = [.null, .bool(true), .number("1"), .string("s"), .string(""), .array([]),
                                   .array([.string("a"), .number("2")]), .array([.string("a")]),
                                   .object(JSONObject(["homeAccountId": .string("h")])),
                                   .object(JSONObject(["username": .number("3")])), .object(JSONObject()),
                                   .object(JSONObject(["username": .string("u"), "homeAccountId": .null]))]
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
            guard let plain = try read(params) else { continue }
            accepted += 1
            let decoded = try ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: params)
            XCTAssertTrue(same(plain, decoded), "\(params)")
        }
        XCTAssertGreaterThan(accepted, 1_000)  // the comparison ran on many accepted shapes
    }

    /// The whole line: the envelope's members, each of them changed, missing or given twice, and other members beside
    /// them; what `SilentRequestLine` accepts, `RPCEnvelope.parse` accepts with the same id, method and params.
    func testAWholeLineIsReadAsTheUsualParseReadsIt() throws {
        let params = JSONValue.object(JSONObject([
            "clientId": .string("c"), "scopes": .array([.string("User.Read")]),
            "account": .object(JSONObject(["homeAccountId": .string("u.t")])), "correlationId": .string("x"),
        ]))
        let values: [JSONValue] = [.null, .string("2.0"), .string("1.0"), .string("acquireTokenSilently"),
                                   .string("getAccounts"), .number("7"), .string("id-1"), .bool(true), .array([]),
                                   .object(JSONObject()), params]
        let keys = ["jsonrpc", "method", "id", "params", "other"]
        var seed: UInt64 = 11
        func next() -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(seed >> 33)
        }
        var accepted = 0
        for round in 0..<20_000 {
            var members: [JSONObject.Member] = [
                .init(key: "jsonrpc", value: .string("2.0")), .init(key: "id", value: .number("\(round)")),
                .init(key: "method", value: .string("acquireTokenSilently")), .init(key: "params", value: params),
            ]
            for _ in 0..<(next() % 3) {
                let member = JSONObject.Member(key: keys[next() % keys.count], value: values[next() % values.count])
                switch next() % 3 {
                case 0: members.append(member)
                case 1: members[next() % members.count] = member
                default: members.remove(at: next() % members.count)
                }
            }
            if next() % 2 == 0 { members.shuffle() }
            let line = JSONWriter().bytes(.object(JSONObject(members)))
            guard let read = SilentRequestLine(line) else { continue }
            accepted += 1
            guard case .single(.success(let request)) = RPCEnvelope.parse(line) else {
                XCTFail("accepted, but not a request: \(String(decoding: line, as: UTF8.self))")
                continue
            }
            XCTAssertEqual(request.method, "acquireTokenSilently")
            XCTAssertEqual(request.id, read.id)
            let decoded = try ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: request.params ?? .null)
            XCTAssertTrue(same(read.params, decoded), String(decoding: line, as: UTF8.self))
        }
        XCTAssertGreaterThan(accepted, 1_000)
        let usual = #"{"jsonrpc":"2.0","id":"a\"b","method":"acquireTokenSilently","params":{"clientId":"c","scopes":[],"account":"u"}}"#
        XCTAssertEqual(SilentRequestLine(Array(usual.utf8))?.id, #""a\"b""#)
        for notPlain in [#"{"jsonrpc":"2.0","method":"acquireTokenSilently","params":{"clientId":"c","scopes":[],"account":"u"}}"#,
                         #"{"jsonrpc":"2.0","id":1,"id":2,"method":"acquireTokenSilently","params":{"clientId":"c","scopes":[],"account":"u"}}"#,
                         usual + " x", String(usual.dropLast())] {
            XCTAssertNil(SilentRequestLine(Array(notPlain.utf8)), notPlain)
        }
        // The version and the method are compared where they lie when written plainly; written with escapes, they are
        // read and compared as strings; near misses are refused either way.
        let escaped = #"{"jsonrpc":"2\u002e0","id":1,"method":"acquireToken\u0053ilently","params":{"clientId":"c","scopes":[],"account":"u"}}"#
        XCTAssertEqual(SilentRequestLine(Array(escaped.utf8))?.id, "1")
        for (version, method) in [("2.0 ", "acquireTokenSilently"), ("2.", "acquireTokenSilently"), ("2.0", "acquireTokenSilentlyX"),
                                  ("2.0", "acquireTokenSilentl"), ("2\\u002e1", "acquireTokenSilently"), ("2.0", "acquireToken\\u0073ilently")] {
            let line = #"{"jsonrpc":"\#(version)","id":1,"method":"\#(method)","params":{"clientId":"c","scopes":[],"account":"u"}}"#
            XCTAssertNil(SilentRequestLine(Array(line.utf8)), line)
        }
    }
}
