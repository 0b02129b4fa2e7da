import BrokerJSON
import BrokerProtocol
import Foundation
import XCTest

/// JSONValueDecoder/JSONValueEncoder against what they replace: Foundation's JSONDecoder and JSONEncoder with
/// `[.sortedKeys, .withoutEscapingSlashes]` (which is what ProtocolCoding used before). The wire must not change.
final class ValueCoderTests: XCTestCase {
    // MARK: Every protocol type, as the wire carries it

    func testEveryCatalogTypeRoundTripsAndEncodesAsJSONEncoderDid() throws {
        var types: [any Codable.Type] = []
        for method in BrokerMethod.allCases { types += [method.signature.params, method.signature.result] }
        for notification in BrokerNotification.allCases { types.append(notification.signature.params) }
        for type in types {
            let shape = try SchemaRecorder.shape(of: type)
            for full in [false, true] {
                try assertLikeFoundation(type, WireSamples.sample(shape, full: full), "\(type) (\(full ? "full" : "minimal"))")
            }
        }
    }

    func testTokenRequestAndAnswerAreByteIdentical() throws {
        let request = try ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: JSONReader.parse(CoderSamples.silentParams))
        XCTAssertEqual(request.account, AccountReference(homeAccountId: "uid.utid", username: "user@contoso.com"))
        XCTAssertEqual(request.scopes, ["https://graph.microsoft.com/User.Read", "offline_access"])
        XCTAssertEqual(request.forceRefresh, false)
        XCTAssertEqual(try ProtocolCoding.encode(request), try foundationBytes(request))

        let answer = CoderSamples.tokenResult
        let bytes = try ProtocolCoding.encode(answer)
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), String(decoding: try foundationBytes(answer), as: UTF8.self))
        XCTAssertFalse(bytes.contains(0x0A))
        XCTAssertEqual(try ProtocolCoding.decode(TokenResult.self, from: bytes), answer)
        // JSONDecoder loses the claims' member order (a dictionary), so compare what it decoded by its encoding.
        XCTAssertEqual(try ProtocolCoding.encode(try JSONDecoder().decode(TokenResult.self, from: Data(bytes))), bytes)
    }

    func testOptionalsAbsentNullAndWrittenNull() throws {
        let absent = try decode(GetAccountParams.self, #"{"clientId":"c"}"#)
        let null = try decode(GetAccountParams.self, #"{"clientId":"c","homeAccountId":null,"username":null}"#)
        XCTAssertNil(absent.homeAccountId)
        XCTAssertNil(null.username)
        XCTAssertEqual(text(try ProtocolCoding.encode(null)), #"{"clientId":"c"}"#, "encodeIfPresent leaves nil out")
        XCTAssertEqual(text(try ProtocolCoding.encode(AccountResult(account: nil))), #"{"account":null}"#)
        XCTAssertEqual(text(try ProtocolCoding.encode(NoParams())), "{}")
        XCTAssertEqual(text(try ProtocolCoding.encode(AccountReference("bare"))), #""bare""#)
    }

    // MARK: Strings

    func testStringsWithQuotesControlCharactersAndUnicode() throws {
        var controls = ""
        for scalar in 0..<0x20 { controls.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        let strings = [#"quote " backslash \ slash / "#, controls, "\u{7F} é ß 漢字 😀 \u{2028}\u{2029} \u{FEFF}", "", "</script>"]
        for string in strings {
            let value = BrowserURLNotification(requestId: string, url: "https://x/?q=\(string)")
            let ours = try ProtocolCoding.encode(value)
            XCTAssertFalse(ours.contains(0x0A), "no raw newline on the wire")
            XCTAssertEqual(try ProtocolCoding.decode(BrowserURLNotification.self, from: ours), value)
            XCTAssertEqual(try JSONDecoder().decode(BrowserURLNotification.self, from: Data(ours)), value)
            XCTAssertEqual(text(ours), text(try foundationBytes(value)))
        }
    }

    func testEveryASCIICharacterAtEveryOffsetOfAWord() throws {
        // The wire writer skips eight bytes at a time when none needs escaping: try each byte in each lane.
        for byte in 0..<0x80 {
            for offset in 0..<17 {
                var string = String(repeating: "a", count: offset)
                string.unicodeScalars.append(Unicode.Scalar(UInt8(byte)))
                string += "é-bcdefghijklmnopq"
                let value = SubscribeResult(events: [string])
                XCTAssertEqual(try ProtocolCoding.encode(value), try foundationBytes(value), "byte \(byte) at \(offset)")
            }
        }
    }

    func testUnicodeEscapesDecode() throws {
        let note = try decode(BrowserURLNotification.self, #"{"requestId":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t\u0000","url":"\u2028"}"#)
        XCTAssertEqual(note.requestId, "é😀\"\\/\u{08}\u{0C}\n\r\t\u{00}")
        XCTAssertEqual(note.url, "\u{2028}")
    }

    // MARK: Numbers

    func testNumbersIntoIntegerFields() throws {
        func expiresIn(_ literal: String) throws -> Int64 {
            try decode(DeviceCodeNotification.self,
                       #"{"requestId":"r","userCode":"u","verificationUri":"v","message":"m","expiresIn":\#(literal)}"#).expiresIn
        }
        XCTAssertEqual(try expiresIn("900"), 900)
        XCTAssertEqual(try expiresIn("-0"), 0)
        XCTAssertEqual(try expiresIn("2.0"), 2)
        XCTAssertEqual(try expiresIn("1e3"), 1000)
        XCTAssertEqual(try expiresIn("1E+2"), 100)
        XCTAssertEqual(try expiresIn("0.5e1"), 5)
        XCTAssertEqual(try expiresIn("12300e-2"), 123)
        XCTAssertEqual(try expiresIn("-9223372036854775808"), Int64.min)
        XCTAssertEqual(try expiresIn("9223372036854775807"), Int64.max)
        XCTAssertEqual(try expiresIn("9.223372036854775807e18"), Int64.max, "exact, not by way of a Double")
        let failures = [
            ("1.5", "parameter 'expiresIn': 1.5 is not an integer (expected Int64)"),
            ("1e-1", "parameter 'expiresIn': 1e-1 is not an integer (expected Int64)"),
            ("9223372036854775808", "parameter 'expiresIn': 9223372036854775808 is out of range for Int64"),
            ("-9223372036854775809", "parameter 'expiresIn': -9223372036854775809 is out of range for Int64"),
            ("1e400", "parameter 'expiresIn': 1e400 is out of range for Int64"),
            ("1e999999999999", "parameter 'expiresIn': 1e999999999999 is out of range for Int64"),
            (String(repeating: "9", count: 100),
             "parameter 'expiresIn': \(String(repeating: "9", count: 40))… is out of range for Int64"),
            ("\"900\"", "parameter 'expiresIn' must be an integer"),
            ("true", "parameter 'expiresIn' must be an integer"),
            ("null", "parameter 'expiresIn' must be an integer, not null"),
        ]
        for (literal, message) in failures {
            XCTAssertThrowsError(try expiresIn(literal), literal) { error in
                XCTAssertEqual(ProtocolCoding.describe(error), message, literal)
            }
        }
        // Tiny fractions must not be a quadratic walk over their zeros.
        XCTAssertThrowsError(try expiresIn("0." + String(repeating: "0", count: 500_000) + "1"))
    }

    func testNarrowAndUnsignedIntegersAndDoubles() throws {
        XCTAssertEqual(try decode(Numbers.self, #"{"small":-128,"unsigned":4294967295,"real":1e2}"#),
                       Numbers(small: -128, unsigned: 4_294_967_295, real: 100))
        for (json, message) in [
            (#"{"small":128,"unsigned":0,"real":0}"#, "parameter 'small': 128 is out of range for Int8"),
            (#"{"small":0,"unsigned":-1,"real":0}"#, "parameter 'unsigned': -1 is out of range for UInt32"),
            (#"{"small":0,"unsigned":0,"real":1e400}"#, "parameter 'real': Number 1e400 is not representable as Double"),
            (#"{"small":0,"unsigned":0,"real":1e-400}"#, "parameter 'real': Number 1e-400 is not representable as Double"),
        ] {
            XCTAssertThrowsError(try decode(Numbers.self, json)) { XCTAssertEqual(ProtocolCoding.describe($0), message) }
        }
        for real in [0.1, 1.0, -2.5, 1e20, 1e-7, 123456789.125, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude] {
            let value = Numbers(small: 1, unsigned: 2, real: real)
            XCTAssertEqual(try ProtocolCoding.encode(value), try foundationBytes(value), "\(real)")
            XCTAssertEqual(try ProtocolCoding.decode(Numbers.self, from: try ProtocolCoding.encode(value)), value)
        }
        XCTAssertThrowsError(try ProtocolCoding.encode(Numbers(small: 0, unsigned: 0, real: .nan))) { error in
            guard case EncodingError.invalidValue(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["real"])
        }
        XCTAssertEqual(try decode(Numbers.self, #"{"small":1,"unsigned":2,"real":3}"#).real, 3)
    }

    // MARK: Errors and their messages

    func testErrorsMatchJSONDecoderAndReadWell() throws {
        let cases: [(any Decodable.Type, String, String)] = [
            (GetAccountParams.self, "{}", "missing parameter 'clientId'"),
            (GetAccountParams.self, #"{"clientId":5}"#, "parameter 'clientId' must be a string"),
            (GetAccountParams.self, #"{"clientId":null}"#, "parameter 'clientId' must be a string, not null"),
            (GetAccountParams.self, #"{"clientId":"c","username":[]}"#, "parameter 'username' must be a string"),
            (RemoveAccountParams.self, #"{"clientId":"c","account":{}}"#,
             "parameter 'account.homeAccountId': an account needs homeAccountId or username"),
            (RemoveAccountParams.self, #"{"clientId":"c","account":7}"#,
             "parameter 'account' must be of type Dictionary<String, Any>"),
            (RemoveAccountParams.self, #"{"clientId":"c","account":null}"#,
             "parameter 'account' must be of type Dictionary<String, Any>, not null"),
            (AcquireTokenSilentlyParams.self, #"{"clientId":"c","scopes":["a"]}"#, "missing parameter 'account'"),
            (AcquireTokenSilentlyParams.self, #"{"clientId":"c","scopes":"a","account":"x"}"#,
             "parameter 'scopes' must be of type Array<Any>"),
            (AcquireTokenSilentlyParams.self, #"{"clientId":"c","scopes":["a",1],"account":"x"}"#,
             "parameter 'scopes.[1]' must be a string"),
            (AcquireTokenSilentlyParams.self, #"{"clientId":"c","scopes":[],"account":"x","forceRefresh":"yes"}"#,
             "parameter 'forceRefresh' must be a boolean"),
            (AccountsResult.self, #"{"accounts":[{"homeAccountId":"h","username":"u","environment":"e","realm":"r","#
                + #""tenantProfiles":[{"environment":"e"}],"apps":[],"hiddenFrom":[],"signInRequired":false}]}"#,
             "missing parameter 'accounts.[0].tenantProfiles.[0].realm'"),
            (GetAccountsParams.self, "[]", "parameter 'params' must be of type Dictionary<String, Any>"),
        ]
        for (type, json, message) in cases {
            guard let ours = thrown({ try ProtocolCoding.decode(type, from: try JSONReader.parse(json)) }),
                  let theirs = thrown({ try JSONDecoder().decode(type, from: Data(json.utf8)) }) else {
                XCTFail("decoded: \(json)")
                continue
            }
            XCTAssertEqual(ProtocolCoding.describe(ours), message, json)
            XCTAssertEqual(ProtocolCoding.describe(ours), ProtocolCoding.describe(theirs), "same error as JSONDecoder: \(json)")
            XCTAssertEqual(Self.kind(ours), Self.kind(theirs), json)
        }
    }

    func testBytesThatAreNotJSON() {
        XCTAssertThrowsError(try ProtocolCoding.decode(NoParams.self, from: Array(#"{"a":"#.utf8))) { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(context.codingPath.isEmpty)
            XCTAssertTrue(context.debugDescription.hasPrefix("The given data was not valid JSON"), context.debugDescription)
        }
    }

    func testUnkeyedContainerAtTheEnd() throws {
        XCTAssertEqual(try decode(Pair.self, "[1,2]"), Pair(first: 1, second: 2))
        for json in ["[1]", "[]"] {
            guard let ours = thrown({ try decode(Pair.self, json) }),
                  let theirs = thrown({ try JSONDecoder().decode(Pair.self, from: Data(json.utf8)) }) else {
                XCTFail("decoded: \(json)")
                continue
            }
            XCTAssertEqual(Self.kind(ours), Self.kind(theirs))
            XCTAssertEqual((ours as? DecodingError)?.path, (theirs as? DecodingError)?.path, json)
        }
    }

    func testDuplicateKeysFirstWinsOnInputLastWinsOnOutput() throws {
        let json = #"{"clientId":"first","clientId":"second"}"#
        XCTAssertEqual(try decode(GetAccountParams.self, json).clientId, "first")
        XCTAssertEqual(try JSONDecoder().decode(GetAccountParams.self, from: Data(json.utf8)).clientId, "first")
        let claims = JSONValue.object(JSONObject([.init(key: "k", value: .int(1)), .init(key: "k", value: .int(2))]))
        XCTAssertEqual(text(try ProtocolCoding.encode(claims)), #"{"k":2}"#)
        XCTAssertEqual(text(try ProtocolCoding.encode(claims)), text(try foundationBytes(claims)))
    }

    // MARK: JSONValue, nesting, raw, super coders

    func testJSONValueRoundTripsAndEncodesLikeItsCodableConformance() throws {
        let claims = CoderSamples.claims
        var parsed = try XCTUnwrap(claims.objectValue)
        parsed["wids"] = .array([.string("b79fbf4d-3ef9-4689-8143-76b194e85509")])
        XCTAssertEqual(try JSONValueDecoder().decode(JSONValue.self, from: claims), .object(parsed),
                       "kept as is (member order, number literals) but for the raw member, parsed")
        let ours = try JSONValueEncoder().encode(claims)
        XCTAssertEqual(ours, try JSONValueEncoder().encode(ThroughCodable(value: claims)), "fast path = Codable path")
        XCTAssertEqual(text(JSONWriter.wireBytes(ours)), text(try foundationBytes(claims)))
        let decodedByCodable = try JSONValueDecoder().decode(ThroughCodable.self, from: claims).value
        XCTAssertEqual(try JSONValueEncoder().encode(decodedByCodable), ours)
    }

    func testRawValuesAreParsedWhenMet() throws {
        XCTAssertEqual(try JSONValueDecoder().decode(String.self, from: .raw(#" "x" "#)), "x")
        let params = JSONValue.object(JSONObject(["clientId": .raw(#""c""#), "scopes": .raw(#"["a", "b",]"#), "account": .raw("{\"username\":\n\"u\"}")]))
        let decoded = try JSONValueDecoder().decode(AcquireTokenSilentlyParams.self, from: params)
        XCTAssertEqual(decoded.scopes, ["a", "b"])
        XCTAssertEqual(decoded.account.username, "u")
        let nullInRaw = try JSONValueDecoder().decode(GetAccountParams.self, from: .object(JSONObject([
            "clientId": .string("c"), "username": .raw(" null "),
        ])))
        XCTAssertNil(nullInRaw.username, "null kept verbatim is still null")
        XCTAssertEqual(try JSONValueDecoder().decode([String?].self, from: .array([.raw("null"), .raw(#""s""#)])), [nil, "s"])
        let nested = JSONValue.array([.raw(#"{"a":[1,2]}"#)])
        XCTAssertEqual(try JSONValueDecoder().decode(JSONValue.self, from: nested), .array([try JSONReader.parse(#"{"a":[1,2]}"#)]))
        XCTAssertEqual(text(try ProtocolCoding.encode(nested)), #"[{"a":[1,2]}]"#)
        XCTAssertThrowsError(try JSONValueDecoder().decode(GetAccountParams.self, from: .object(JSONObject(["clientId": .raw("{")])))) {
            guard case DecodingError.dataCorrupted(let context) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["clientId"])
        }
    }

    func testDeepNesting() throws {
        var json = JSONValue.string("bottom")
        for level in 0..<200 { json = level.isMultiple(of: 2) ? .array([json, .int(level)]) : .object(JSONObject(["k\(level)": json])) }
        let account = CoderSamples.account(claims: json)
        let bytes = try ProtocolCoding.encode(account)
        XCTAssertEqual(bytes, try foundationBytes(account))
        XCTAssertEqual(try ProtocolCoding.decode(Account.self, from: bytes), account)

        var chain = Chain(name: "leaf", next: nil)
        for level in 0..<200 { chain = Chain(name: "n\(level)", next: chain) }
        let chainBytes = try ProtocolCoding.encode(chain)
        XCTAssertEqual(chainBytes, try foundationBytes(chain))
        XCTAssertEqual(try ProtocolCoding.decode(Chain.self, from: chainBytes), chain)
    }

    func testSuperDecoderAndSuperEncoder() throws {
        let value = Derived(base: 7, extra: "e")
        let bytes = try ProtocolCoding.encode(value)
        XCTAssertEqual(text(bytes), text(try foundationBytes(value)))
        XCTAssertEqual(try ProtocolCoding.decode(Derived.self, from: bytes), value)
        XCTAssertEqual(try JSONDecoder().decode(Derived.self, from: Data(bytes)), value)
        XCTAssertThrowsError(try decode(Derived.self, #"{"extra":"e"}"#)) { error in
            XCTAssertEqual(ProtocolCoding.describe(error), "parameter 'super' must be an integer, not null")
        }
    }

    // MARK: The envelope

    func testEnvelopeParsesParamsOnce() throws {
        guard case .single(.success(let request)) = RPCEnvelope.parse(Array(CoderSamples.silentRequestLine.utf8)) else {
            return XCTFail("not a request")
        }
        XCTAssertEqual(request.id, "7")
        XCTAssertEqual(request.params, try JSONReader.parse(CoderSamples.silentParams))
        let params = try ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: try XCTUnwrap(request.params))
        XCTAssertEqual(params.clientId, "04b07795-8ddb-461a-bbee-02f9e1bf7b46")

        guard case .single(.success(let bare)) = RPCEnvelope.parse(Array(#"{"jsonrpc":"2.0","id":1,"method":"getStatus"}"#.utf8)) else {
            return XCTFail("not a request")
        }
        XCTAssertNil(bare.params)
        guard case .single(.failure(let failure)) = RPCEnvelope.parse(Array(#"{"jsonrpc":"2.0","id":"a","method":"m","params":[1]}"#.utf8)) else {
            return XCTFail("array params accepted")
        }
        XCTAssertEqual(failure.id, #""a""#)
        XCTAssertEqual(failure.error.code, RPCErrorCode.invalidParams)
    }

    func testHostileInputNeverTraps() throws {
        let line = Array(CoderSamples.silentParams.utf8)
        var generator = SplitMix(seed: 42)
        for _ in 0..<3000 {
            var mutated = line
            for _ in 0..<Int(generator.next() % 4 + 1) {
                let index = Int(generator.next() % UInt64(mutated.count))
                let alphabet = Array(#"{}[]":,0123456789.eE-+"nulltrue\u"#.utf8)
                mutated[index] = alphabet[Int(generator.next() % UInt64(alphabet.count))]
            }
            _ = try? ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: mutated)
            _ = try? ProtocolCoding.decode(TokenResult.self, from: mutated)
            _ = try? ProtocolCoding.decode(JSONValue.self, from: mutated)
        }
    }

    // MARK: Helpers

    private func decode<T: Decodable>(_ type: T.Type, _ json: String) throws -> T {
        try ProtocolCoding.decode(type, from: try JSONReader.parse(json))
    }

    private func thrown(_ body: () throws -> Any) -> Error? {
        do { _ = try body() } catch { return error }
        return nil
    }

    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    private func foundationBytes<T: Encodable>(_ value: T) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    /// Decoded by both stacks from the same sample, each value encodes to the same bytes, and ours decodes again.
    private func assertLikeFoundation<T: Codable>(_ type: T.Type, _ sample: JSONValue, _ label: String) throws {
        let sampleBytes = JSONWriter().bytes(sample)
        let ours = try ProtocolCoding.encode(try ProtocolCoding.decode(type, from: sample))
        let theirs = try foundationBytes(try JSONDecoder().decode(type, from: Data(sampleBytes)))
        XCTAssertEqual(text(ours), text(theirs), label)
        XCTAssertEqual(try ProtocolCoding.encode(try ProtocolCoding.decode(type, from: ours)), ours, label)
    }

    private static func kind(_ error: Error) -> String {
        switch error as? DecodingError {
        case .keyNotFound?: return "keyNotFound"
        case .typeMismatch?: return "typeMismatch"
        case .valueNotFound?: return "valueNotFound"
        case .dataCorrupted?: return "dataCorrupted"
        default: return "\(error)"
        }
    }
}

extension DecodingError {
    fileprivate var path: [String] {
        switch self {
        case .keyNotFound(_, let context), .typeMismatch(_, let context), .valueNotFound(_, let context),
             .dataCorrupted(let context):
            return context.codingPath.map(\.stringValue)
        @unknown default:
            return []
        }
    }
}

private struct Numbers: Codable, Equatable {
    var small: Int8
    var unsigned: UInt32
    var real: Double
}

private struct Pair: Codable, Equatable {
    var first: Int
    var second: Int
    init(first: Int, second: Int) { self.first = first; self.second = second }
    init(from decoder: Decoder) throws {
        var list = try decoder.unkeyedContainer()
        first = try list.decode(Int.self)
        second = try list.decode(Int.self)
    }
    func encode(to encoder: Encoder) throws {
        var list = encoder.unkeyedContainer()
        try list.encode(first)
        try list.encode(second)
    }
}

private struct Chain: Codable, Equatable {
    var name: String
    var next: Box?
    init(name: String, next: Chain?) { self.name = name; self.next = next.map(Box.init) }
    final class Box: Codable, Equatable {
        let chain: Chain
        init(_ chain: Chain) { self.chain = chain }
        init(from decoder: Decoder) throws { chain = try Chain(from: decoder) }
        func encode(to encoder: Encoder) throws { try chain.encode(to: encoder) }
        static func == (lhs: Box, rhs: Box) -> Bool { lhs.chain == rhs.chain }
    }
}

/// A subclass-style type: the base's fields under `super`, as Codable's class-hierarchy convention has it.
private struct Derived: Codable, Equatable {
    var base: Int
    var extra: String
    private enum CodingKeys: String, CodingKey { case extra }
    init(base: Int, extra: String) { self.base = base; self.extra = extra }
    init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        extra = try container.decode(String.self, forKey: .extra)
        base = try container.superDecoder().singleValueContainer().decode(Int.self)
    }
    func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(extra, forKey: .extra)
        var base = container.superEncoder().singleValueContainer()
        try base.encode(self.base)
    }
}

/// Forces JSONValue through its Codable conformance rather than the coders' fast path.
private struct ThroughCodable: Codable {
    var value: JSONValue
    init(value: JSONValue) { self.value = value }
    init(from decoder: Decoder) throws { value = try JSONValue(from: decoder) }
    func encode(to encoder: Encoder) throws { try value.encode(to: encoder) }
}

/// A small seeded generator (SplitMix64), so that a failing input can be made again; shared by this target's tests.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A silent token request and its answer, shaped like real ones (JWT-sized tokens, an id_token's claims).
enum CoderSamples {
    static let silentParams = #"{"clientId":"04b07795-8ddb-461a-bbee-02f9e1bf7b46","#
        + #""authority":"https://login.microsoftonline.com/organizations","#
        + #""scopes":["https://graph.microsoft.com/User.Read","offline_access"],"#
        + #""account":{"homeAccountId":"uid.utid","username":"user@contoso.com"},"forceRefresh":false,"#
        + #""correlationId":"5f1e7d3c-9a0b-4c2d-8e6f-123456789abc"}"#

    static let silentRequestLine = #"{"jsonrpc":"2.0","id":7,"method":"acquireTokenSilently","params":"# + silentParams + "}"

    static let claims = JSONValue.object(JSONObject([
        "aud": .string("04b07795-8ddb-461a-bbee-02f9e1bf7b46"),
        "iss": .string("https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0"),
        "iat": .number("1700000000"), "nbf": .number("1.7e9"), "exp": .number("1700003600.50"),
        "name": .string("Zoë \"Z\" Müller 😀"), "oid": .string("00000000-0000-0000-66f3-3332eca7ea81"),
        "preferred_username": .string("zoe@contoso.com"), "rh": .string("0.AQk/x/\\y"),
        "roles": .array([.string("Reader"), .string("Writer")]), "ver": .string("2.0"),
        "xms_ctx": .object(JSONObject(["b": .bool(true), "a": .null, "n": .number("-0"), "big": .number("12345678901234567890")])),
        "wids": .raw(#"[ "b79fbf4d-3ef9-4689-8143-76b194e85509" ]"#),
    ]))

    static func account(claims: JSONValue?) -> Account {
        Account(homeAccountId: "uid.utid", username: "zoe@contoso.com", environment: "login.microsoftonline.com",
                realm: "72f988bf-86f1-41af-91ab-2d7cd011db47", localAccountId: "00000000-0000-0000-66f3-3332eca7ea81",
                name: "Zoë Müller", authorityType: "MSSTS",
                tenantProfiles: [TenantProfile(realm: "72f988bf-86f1-41af-91ab-2d7cd011db47",
                                               environment: "login.microsoftonline.com",
                                               localAccountId: "00000000-0000-0000-66f3-3332eca7ea81", username: "zoe@contoso.com")],
                apps: [AppTokens(clientId: "04b07795-8ddb-461a-bbee-02f9e1bf7b46", familyId: "1", hasRefreshToken: true,
                                 accessTokens: [AccessTokenInfo(scopes: ["https://graph.microsoft.com/User.Read"],
                                                                realm: "72f988bf-86f1-41af-91ab-2d7cd011db47", expiresOn: 1_700_003_600),
                                                AccessTokenInfo(scopes: ["https://management.core.windows.net//.default"],
                                                                realm: nil, expiresOn: nil)])],
                hiddenFrom: [], signInRequired: false, accountClaims: claims)
    }

    static let tokenResult = TokenResult(
        accessToken: jwt(1400), tokenType: "Bearer", expiresOn: 1_700_003_600, extendedExpiresOn: 1_700_007_200,
        refreshOn: nil, grantedScopes: ["https://graph.microsoft.com/User.Read", "openid", "profile", "offline_access"],
        idToken: jwt(900), account: account(claims: canonicalClaims), authority: "https://login.microsoftonline.com/organizations",
        correlationId: "5f1e7d3c-9a0b-4c2d-8e6f-123456789abc", source: "cache")

    /// The claims as they come back from the wire (numbers as JSONEncoder writes them, raw parsed), so that a
    /// decoded TokenResult compares equal.
    static var canonicalClaims: JSONValue {
        (try? JSONReader.parse(JSONValueEncoder().encodeToBytes(claims))) ?? .null
    }

    /// Base64url text of a token's size: three dot-separated parts, like a JWT.
    static func jwt(_ length: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var text = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9."
        for index in 0..<length { text.append(alphabet[(index * 7 + index / 3) % alphabet.count]) }
        return text + ".c2lnbmF0dXJl"
    }
}
