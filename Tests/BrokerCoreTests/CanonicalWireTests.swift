@testable import BrokerJSON
import XCTest

/// `JSONWriter.writeCanonicalWire` (what an account's text writes its claims with) against what it stands for: the
/// value put through `JSONValueEncoder` and written with `writeWire`, byte for byte, on random values.
final class CanonicalWireTests: XCTestCase {
    private static let keys = ["sub", "aud", "exp", "a", "b", "ab", "aud2", "é", "Z", "z", "prefix_shared_1",
                               "prefix_shared_2", ""]
    private static let numbers = ["0", "-0", "1", "-1", "1795803914", "007", "1.0", "1.5", "-2.25", "1e3", "1E-2",
                                  "0.1", "9223372036854775807", "9223372036854775808", "-9223372036854775809", "1e400",
                                  "12.000"]
    private static let strings = ["", "plain", "with \"quote\"", "back\\slash", "line\nbreak", "tab\t", "é漢", "a/b",
                                  "\u{01}"]

    private func randomValue(depth: Int, using generator: inout SystemRandomNumberGenerator) -> JSONValue {
        switch Int.random(in: 0..<(depth > 2 ? 5 : 8), using: &generator) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2, 3: return .number(Self.numbers.randomElement(using: &generator)!)
        case 4: return .string(Self.strings.randomElement(using: &generator)!)
        case 5: return .raw(#"{"b":1,"a":[2.50,"x"]}"#)
        case 6:
            return .array((0..<Int.random(in: 0...4, using: &generator)).map { _ in
                randomValue(depth: depth + 1, using: &generator)
            })
        default:
            // Keys drawn from a few, so that an object often holds the same key twice.
            return .object(JSONObject((0..<Int.random(in: 0...6, using: &generator)).map { _ in
                JSONObject.Member(key: Self.keys.randomElement(using: &generator)!,
                                  value: randomValue(depth: depth + 1, using: &generator))
            }))
        }
    }

    func testTheCanonicalWriterWritesWhatTheEncoderAndTheWireWriterWrite() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3_000 {
            let value = randomValue(depth: 0, using: &generator)
            var written: [UInt8] = []
            try JSONWriter.writeCanonicalWire(value, into: &written)
            var expected: [UInt8] = []
            JSONWriter.writeWire(try JSONValueEncoder().encode(value), into: &expected)
            XCTAssertEqual(String(decoding: written, as: UTF8.self), String(decoding: expected, as: UTF8.self),
                           "\(value)")
        }
    }

    /// An id token's claims as they come (unsorted, an integer time, a list): sorted, everything else as it was.
    func testIdTokenClaimsAreSortedAndOtherwiseKept() throws {
        let payload = #"{"sub":"s","aud":"c","exp":1795803914,"roles":["b","a"],"nbf":1.0}"#
        let claims = try JSONReader.parse(Array(payload.utf8))
        var written: [UInt8] = []
        try JSONWriter.writeCanonicalWire(claims, into: &written)
        XCTAssertEqual(String(decoding: written, as: UTF8.self),
                       #"{"aud":"c","exp":1795803914,"nbf":1,"roles":["b","a"],"sub":"s"}"#)
    }
}

/// `CanonicalJSONText` (an id token's claims written from their bytes) against the tree's way it stands for:
/// `JSONReader.parse`, then `JSONWriter.writeCanonicalWire`. On random texts, the fast text is the tree's or nil; on
/// texts of the forms it takes (what id tokens hold), it is never nil.
final class CanonicalJSONTextTests: XCTestCase {
    private static let plainKeys = ["sub", "aud", "exp", "a", "b", "ab", "aud2", "Z", "z", "prefix_shared_1",
                                    "prefix_shared_2", "", "with space", "a/b"]
    private static let plainNumbers = ["0", "1", "-1", "1795803914", "-42", "123456789012345678"]
    private static let plainStrings = ["", "plain", "a/b", "https://login.example.test/tid/v2.0", "~!@#$%^&*()"]
    // What the fast way leaves to the tree, and what is not JSON at all.
    private static let otherNumbers = ["-0", "007", "1.0", "1.5", "1e3", "1E-2", "-", "1.", "9223372036854775807",
                                       "1234567890123456789", "1e400", "+1", "0x10"]
    private static let otherStrings = [#""with \"quote\"""#, #""back\\slash""#, #""\u0061""#, "\"é漢\"", "\"\u{7F}\"",
                                       "\"tab\t\"", #""\n""#, "\"open"]
    private static let spaces = ["", "", "", " ", "\n", "\t", "\r\n  "]

    private struct Draw {
        var generator = SystemRandomNumberGenerator()
        mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &generator) < percent }
        mutating func pick(_ list: [String]) -> String { list.randomElement(using: &generator)! }
        mutating func count(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &generator) }
    }

    /// A JSON text; `plain`: only the forms the fast way takes, with distinct keys.
    private func text(depth: Int, plain: Bool, _ draw: inout Draw) -> String {
        let space = { (draw: inout Draw) in draw.pick(Self.spaces) }
        switch draw.count(0...(depth > 2 ? 4 : 6)) {
        case 0: return draw.pick(["null", "true", "false"] + (plain ? [] : ["nul", "True", "falsey"]))
        case 1, 2:
            return !plain && draw.chance(30) ? draw.pick(Self.otherNumbers) : draw.pick(Self.plainNumbers)
        case 3, 4:
            return !plain && draw.chance(30) ? draw.pick(Self.otherStrings) : "\"\(draw.pick(Self.plainStrings))\""
        case 5:
            let elements = (0..<draw.count(0...4)).map { _ in
                space(&draw) + text(depth: depth + 1, plain: plain, &draw)
            }
            let trailing = !plain && draw.chance(5) ? "," : ""
            return "[" + elements.joined(separator: ",") + trailing + space(&draw) + "]"
        default:
            var keys = (0..<draw.count(0...6)).map { _ in draw.pick(Self.plainKeys) }
            if plain { keys = Array(Set(keys)) } else if draw.chance(20) { keys.append(draw.pick(Self.otherStrings)) }
            let members = keys.map { key -> String in
                let quoted = key.hasPrefix("\"") ? key : "\"\(key)\""
                let value = text(depth: depth + 1, plain: plain, &draw)
                return space(&draw) + quoted + space(&draw) + ":" + space(&draw) + value
            }
            let trailing = !plain && draw.chance(5) ? "," : ""
            return "{" + members.joined(separator: ",") + trailing + space(&draw) + "}"
        }
    }

    private func treeText(_ bytes: [UInt8]) throws -> [UInt8]? {
        guard let value = try? JSONReader.parse(bytes) else { return nil }
        var written: [UInt8] = []
        try JSONWriter.writeCanonicalWire(value, into: &written)
        return written
    }

    func testTheFastTextIsTheTreesOrNothing() throws {
        var draw = Draw()
        var fast = 0, invalid = 0
        for _ in 0..<6_000 {
            var text = text(depth: 0, plain: false, &draw)
            if draw.chance(3) { text = "\u{FEFF}" + text }
            if draw.chance(3) { text += draw.pick([" x", "]", "1"]) }
            text = draw.pick(Self.spaces) + text + draw.pick(Self.spaces)
            let bytes = Array(text.utf8)
            let expected = try treeText(bytes)
            if expected == nil { invalid += 1 }
            guard let written = CanonicalJSONText.of(bytes) else { continue }
            fast += 1
            let tree = expected.map { String(decoding: $0, as: UTF8.self) }
            XCTAssertEqual(String(decoding: written, as: UTF8.self), tree, text)
        }
        // Both ways are taken: the comparison above is made on thousands of texts, and invalid ones are among them.
        XCTAssertGreaterThan(fast, 1_000)
        XCTAssertGreaterThan(invalid, 200)
    }

    func testTextsOfTheFormsIdTokensHoldTakeTheFastWay() throws {
        var draw = Draw()
        for _ in 0..<3_000 {
            let text = text(depth: 0, plain: true, &draw)
            let bytes = Array(text.utf8)
            let written = try XCTUnwrap(CanonicalJSONText.of(bytes), text)
            let expected = try treeText(bytes).map { String(decoding: $0, as: UTF8.self) }
            XCTAssertEqual(String(decoding: written, as: UTF8.self), expected)
        }
    }

    /// Deeper than `maximumDepth`: the tree's way (JSONReader reads to 256).
    func testDeepTextsAreLeftToTheTree() throws {
        let deep = String(repeating: "[", count: CanonicalJSONText.maximumDepth + 1)
            + String(repeating: "]", count: CanonicalJSONText.maximumDepth + 1)
        XCTAssertNil(CanonicalJSONText.of(Array(deep.utf8)))
        let fits = String(repeating: "[", count: CanonicalJSONText.maximumDepth) + String(repeating: "]", count: CanonicalJSONText.maximumDepth)
        XCTAssertEqual(CanonicalJSONText.of(Array(fits.utf8)), Array(fits.utf8))
    }

    /// `JWTPayload.canonicalClaims` is `claims(of:)` written canonically, for payloads either way takes, and fails
    /// where `claims(of:)` does.
    func testCanonicalClaimsAreTheClaimsWritten() throws {
        var draw = Draw()
        func token(_ payload: String) -> String {
            "eyJhbGciOiJub25lIn0." + Base64URL.encode(Array(payload.utf8)) + ".sig"
        }
        for payload in [#"{"sub":"s","aud":"c","exp":1795803914,"roles":["b","a"],"nbf":1.0}"#,
                        #"{ "name": "Jos\u00e9", "sub" : "s", "sub": "t" }"#, #"{"b":1,"a":2}"#, "[1]", "\"s\"", "{", ""]
            + (0..<500).map({ _ in text(depth: 0, plain: draw.chance(50), &draw) }) {
            let expected: String? = try? {
                var written: [UInt8] = []
                try JSONWriter.writeCanonicalWire(.object(try JWTPayload.claims(of: token(payload))), into: &written)
                return String(decoding: written, as: UTF8.self)
            }()
            let canonical = (try? JWTPayload.canonicalClaims(of: token(payload))).map { String(decoding: $0, as: UTF8.self) }
            XCTAssertEqual(canonical, expected, payload)
        }
        XCTAssertEqual(try JWTPayload.canonicalClaims(of: token(#"{"b":[true,null],"a":-3}"#)),
                       Array(#"{"a":-3,"b":[true,null]}"#.utf8))
    }
}
