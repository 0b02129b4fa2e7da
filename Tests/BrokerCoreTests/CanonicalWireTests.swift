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
