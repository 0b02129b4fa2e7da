import BrokerJSON
import XCTest

final class JSONReaderTests: XCTestCase {
    private func parseError(_ text: String, lenient: Bool = false) -> JSONReadError? {
        parseError(Array(text.utf8), lenient: lenient)
    }

    private func parseError(_ bytes: [UInt8], lenient: Bool = false) -> JSONReadError? {
        do {
            _ = try JSONReader.parse(bytes, lenient: lenient)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Skipping

    /// `skipValue` accepts what `readValue` accepts, refuses what it refuses (at the same byte), and ends where it
    /// ends: on well-formed values and on each of them cut short or with a byte changed.
    func testSkippingAValueIsReadingItWithoutKeepingIt() {
        let samples = [
            #"{"a":"plain","b":[1,-2.5e3,true,false,null],"c":{"d":"esc\"aped\u00e9","e":[]},"f":"é ü 漢字"}"#,
            #"["\ud83d\ude00", "x\/y", {"k": {}}, 0, -0.0, 1E+2]"#,
            #""a string with \n and \t""#, "12345", "null", "true",
            #"{"\u0061b":1,"ké":{"x\"y":[],"plain-key-longer-than-fifteen":{}},"":2}"#,  // keys skipped, not read
        ]
        var generator = SystemRandomNumberGenerator()
        func outcome(_ bytes: [UInt8], skip: Bool) -> (Int?, JSONReadError?) {
            var reader = JSONReader(bytes)
            do {
                if skip { try reader.skipValue() } else { _ = try reader.readValue() }
                return (reader.offset, nil)
            } catch {
                return (nil, error)
            }
        }
        for sample in samples {
            let bytes = Array(sample.utf8)
            XCTAssertNil(outcome(bytes, skip: true).1, sample)
            var variants = [bytes]
            for cut in 0..<bytes.count { variants.append(Array(bytes[..<cut])) }
            let replacements: [UInt8] = [0x22, 0x5C, 0x01, 0xFF, 0xC3, 0x7D, 0x5D, 0x2C, 0x20, 0x61]
            for _ in 0..<300 {
                var changed = bytes
                changed[Int.random(in: 0..<changed.count, using: &generator)] = replacements.randomElement(using: &generator)!
                variants.append(changed)
            }
            for variant in variants {
                let (skipped, skipError) = outcome(variant, skip: true)
                let (read, readError) = outcome(variant, skip: false)
                XCTAssertEqual(skipped, read, String(decoding: variant, as: UTF8.self))
                XCTAssertEqual(skipError, readError, String(decoding: variant, as: UTF8.self))
            }
        }
    }

    /// `readMembers` hands over what `readObject` hands over for the keys it names, skips the rest, refuses a named key
    /// given twice, and fails where `readObject` fails: keys plain, escaped (`\u0061` for `a`), non-ASCII or empty.
    func testReadingNamedMembersIsReadingTheObject() {
        let keys = ["a", "é", "", "long-key-of-more-than-fifteen-bytes"]
        let objects = [
            #"{"a":1,"b":[2],"é":"x","":null,"long-key-of-more-than-fifteen-bytes":{"a":2}}"#,
            #"{"\u0061":true, "b" : "s" ,"c":{}}"#, #"{}"#, #"{"b":1}"#, #"{"a":1,"a":2}"#, #"{"b":1,"b":2}"#,
            #"{"a":1,}"#, #"{"a" 1}"#, #"{"a":1"#, #"{a:1}"#, #"{"\x":1}"#, "{\"\u{1}\":1}",
            #"{"b\u0062":1,"ä":2,"an-unnamed-key-of-many-bytes":{"k\"":[]},"a":3}"#, #"{"zz":1,"\u00e9":5}"#,
        ]
        for object in objects {
            var named: [String] = [], everyMember: [String] = []
            var reader = JSONReader(Array(object.utf8))
            var namedError: JSONReadError?, objectError: JSONReadError?
            do {
                try reader.readMembers(keys) { (index, reader) throws(JSONReadError) in
                    named.append("\(keys[index])=\(try reader.readValue())")
                }
            } catch { namedError = error }
            var other = JSONReader(Array(object.utf8))
            do {
                try other.readObject { (key, reader) throws(JSONReadError) in
                    let value = try reader.readValue()
                    if keys.contains(key) { everyMember.append("\(key)=\(value)") }
                }
            } catch { objectError = error }
            if Set(everyMember.map { $0.split(separator: "=")[0] }).count < everyMember.count {
                XCTAssertEqual(namedError, JSONReader.repeatedMember, object)
            } else {
                XCTAssertEqual(namedError, objectError, object)
                if objectError == nil { XCTAssertEqual(named, everyMember, object) }
            }
        }
    }

    // MARK: Strict vs lenient

    func testByteOrderMarkOnlyAcceptedWhenLenient() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array(#"{"a": "b"}"#.utf8)
        XCTAssertEqual(parseError(bytes)?.offset, 0)
        let value = try JSONReader.parse(bytes, lenient: true)
        XCTAssertEqual(value, .object(JSONObject(["a": .string("b")])))
    }

    func testTrailingCommasOnlyAcceptedWhenLenient() throws {
        let error = parseError(#"{"a": 1,}"#)
        XCTAssertNotNil(error)
        XCTAssertEqual(error?.offset, 8)
        XCTAssertNotNil(parseError("[1, 2,]"))
        XCTAssertNotNil(parseError("[1, 2, ]"))

        XCTAssertEqual(try JSONReader.parse(#"{"a": 1,}"#, lenient: true),
                       .object(JSONObject(["a": .number("1")])))
        XCTAssertEqual(try JSONReader.parse("[1, 2 ,\n ]", lenient: true), .array([.number("1"), .number("2")]))
        XCTAssertEqual(try JSONReader.parse(#"{"a": [true,], "b": {"c": null,},}"#, lenient: true),
                       .object(JSONObject([
                           "a": .array([.bool(true)]),
                           "b": .object(JSONObject(["c": .null])),
                       ])))
    }

    func testLenientStillRejectsOtherMistakes() {
        XCTAssertNotNil(parseError("[1,,]", lenient: true))
        XCTAssertNotNil(parseError("{,}", lenient: true))
        XCTAssertNotNil(parseError("[,]", lenient: true))
        XCTAssertNotNil(parseError(#"{"a" 1}"#, lenient: true))
        XCTAssertNotNil(parseError("{'a': 1}", lenient: true))
        XCTAssertNotNil(parseError("[1] [2]", lenient: true))
        XCTAssertNotNil(parseError("", lenient: true))
        XCTAssertNotNil(parseError("nul", lenient: true))
        XCTAssertNotNil(parseError("True", lenient: true))
    }

    func testTrailingDataIsRejected() {
        let error = parseError(#"{"a": 1} x"#)
        XCTAssertEqual(error?.message, "unexpected data after the JSON value")
        XCTAssertEqual(error?.offset, 9)
        XCTAssertNil(parseError("  {\"a\": 1}  \n\t\r "))
    }

    // MARK: UTF-8

    func testInvalidUTF8IsRejectedInBothModes() {
        let cases: [[UInt8]] = [
            [0x22, 0xC3, 0x28, 0x22],              // broken two-byte sequence
            [0x22, 0xFF, 0x22],                    // never valid
            [0x22, 0xC0, 0xAF, 0x22],              // overlong "/"
            [0x22, 0xED, 0xA0, 0x80, 0x22],        // UTF-8-encoded surrogate
            [0x22, 0xE2, 0x82, 0x22],              // truncated three-byte sequence
        ]
        for bytes in cases {
            XCTAssertNotNil(parseError(bytes), "strict accepted \(bytes)")
            XCTAssertNotNil(parseError(bytes, lenient: true), "lenient accepted \(bytes)")
            XCTAssertNotNil(parseError([0x7B, 0x22, 0x6B, 0x22, 0x3A] + bytes + [0x7D], lenient: true),
                            "invalid UTF-8 inside an object member accepted: \(bytes)")
        }
        // ... and in raw (uninterpreted) values too.
        var reader = JSONReader([0x5B, 0x22, 0xFF, 0x22, 0x5D], lenient: true)
        XCTAssertThrowsError(try reader.readRaw())
        // Valid multi-byte text is fine.
        XCTAssertEqual(try JSONReader.parse(Array("\"caf\u{e9} \u{1F600}\"".utf8)), .string("caf\u{e9} \u{1F600}"))
    }

    func testControlCharacterInStringIsRejected() {
        XCTAssertEqual(parseError("\"a\nb\"")?.message, "control character in string")
        XCTAssertNotNil(parseError("\"a\tb\"", lenient: true))
    }

    // MARK: Nesting

    func testNestingLimit() throws {
        let limit = JSONReader.maximumDepth
        XCTAssertEqual(limit, 256)
        let atLimit = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        XCTAssertNoThrow(try JSONReader.parse(atLimit))
        let tooDeep = String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)
        let error = parseError(tooDeep)
        XCTAssertEqual(error?.message, "nesting deeper than 256")
        XCTAssertEqual(error?.offset, limit)

        let objects = String(repeating: #"{"a":"#, count: limit + 1) + "1" + String(repeating: "}", count: limit + 1)
        XCTAssertEqual(parseError(objects, lenient: true)?.message, "nesting deeper than 256")
        // Very deep input fails cleanly instead of overflowing the stack.
        XCTAssertNotNil(parseError(String(repeating: "[", count: 100_000)))
    }

    func testDepthIsCountedPerLevelNotPerContainer() {
        // 300 sibling containers at depth 1 are fine: depth goes back down after each one.
        let siblings = "[" + Array(repeating: "[]", count: 300).joined(separator: ",") + "]"
        XCTAssertNil(parseError(siblings))
        let objects = "[" + Array(repeating: "{}", count: 300).joined(separator: ",") + "]"
        XCTAssertNil(parseError(objects))
    }

    // MARK: Strings and escapes

    func testSimpleEscapes() throws {
        XCTAssertEqual(try JSONReader.parse(#""\"\\\/\b\f\n\r\t""#), .string("\"\\/\u{8}\u{c}\n\r\t"))
        XCTAssertNotNil(parseError(#""\x""#))
        XCTAssertNotNil(parseError(#""\'""#))
        XCTAssertNotNil(parseError(#""abc\"#))
        XCTAssertEqual(parseError(#""abc"#)?.message, "unterminated string")
    }

    func testUnicodeEscapesAndSurrogatePairs() throws {
        XCTAssertEqual(try JSONReader.parse(#""caf\u00e9""#), .string("caf\u{e9}"))
        XCTAssertEqual(try JSONReader.parse(#""\u00E9\u0041""#), .string("\u{e9}A"))
        XCTAssertEqual(try JSONReader.parse(#""\ud83d\ude00""#), .string("\u{1F600}"))
        XCTAssertEqual(try JSONReader.parse(#""\uD834\uDD1E!""#), .string("\u{1D11E}!"))
        XCTAssertEqual(try JSONReader.parse(#""\u0000""#), .string("\u{0}"))

        XCTAssertEqual(parseError(#""\ud83d""#)?.message, "unpaired surrogate")
        XCTAssertEqual(parseError(#""\ud83dx""#)?.message, "unpaired surrogate")
        XCTAssertEqual(parseError(#""\ude00""#)?.message, "unpaired surrogate")
        XCTAssertEqual(parseError(#""\ud83d\u0041""#)?.message, "invalid surrogate pair")
        XCTAssertEqual(parseError(#""\u12""#)?.message, "truncated unicode escape")
        XCTAssertEqual(parseError(#""\u12G4""#)?.message, "invalid hex digit")
    }

    // MARK: Numbers

    func testNumbersKeepTheirLiteralText() throws {
        let literals = ["0", "-0", "1.50e3", "1.50E+03", "-0.0e-0", "1548804634.0556107",
                        "123456789012345678901234567890", "1e400", "0.1000"]
        for literal in literals {
            XCTAssertEqual(try JSONReader.parse(literal), .number(literal))
            XCTAssertEqual(JSONWriter().string(try JSONReader.parse("[\(literal)]")), "[\(literal)]")
        }
    }

    func testInvalidNumbers() {
        for text in ["01", "1.", ".5", "+1", "-", "1e", "1e+", "0x10", "--1", "1.e5", "NaN", "Infinity"] {
            XCTAssertNotNil(parseError(text), "accepted \(text)")
            XCTAssertNotNil(parseError(text, lenient: true), "lenient accepted \(text)")
        }
    }

    func testIntegerValueAcrossVariants() {
        XCTAssertEqual(JSONValue.string("1700000000").integerValue, 1_700_000_000)
        XCTAssertEqual(JSONValue.string("1562842351.202").integerValue, 1_562_842_351)
        XCTAssertEqual(JSONValue.number("1548804634.0556107").integerValue, 1_548_804_634)
        XCTAssertEqual(JSONValue.number("1.7e9").integerValue, 1_700_000_000)
        XCTAssertEqual(JSONValue.string(" 42 ").integerValue, 42)
        XCTAssertNil(JSONValue.string("soon").integerValue)
        XCTAssertNil(JSONValue.null.integerValue)
        XCTAssertNil(JSONValue.number("1e400").integerValue)
    }

    // MARK: Raw values

    func testRawValuesRoundTripByteForByte() throws {
        let members: [(String, String)] = [
            ("a", #"{"x" : 1.50e3,"y":[ true , null ],"z":"caf\u00e9\n"}"#),
            ("b", #""\ud83d\ude00 \"quoted\" \/""#),
            ("c", "-0.0E+0"),
            ("d", "[ ]"),
            ("e", "{\n  \"multi\": \"line\"\n}"),
        ]
        let text = "{" + members.map { "\"\($0.0)\":  \($0.1) " }.joined(separator: ",") + "}"
        var reader = JSONReader(text)
        var raws: [String: String] = [:]
        try reader.readObject { (key, inner) throws(JSONReadError) in raws[key] = try inner.readRaw() }
        try reader.expectEnd()
        for (key, raw) in members {
            XCTAssertEqual(raws[key], raw, "raw text of \(key)")
        }

        // The writer emits raw values verbatim (indented output) ...
        let object = JSONObject(members.map { JSONObject.Member(key: $0.0, value: .raw(raws[$0.0]!)) })
        let written = JSONWriter(indent: 2).bytes(.object(object))
        for (key, raw) in members {
            XCTAssertEqual(try rawValue(in: written, at: [key]), raw)
        }
        // ... and compact output never contains a newline, yet keeps the value.
        let compact = JSONWriter().string(.object(object))
        XCTAssertFalse(compact.contains("\n"))
        XCTAssertEqual(try rawValue(in: Array(compact.utf8), at: ["e"]), #"{"multi":"line"}"#)
        XCTAssertEqual(try rawValue(in: Array(compact.utf8), at: ["a"]), members[0].1)
    }

    func testReadRawRangeAndMemberOrder() throws {
        let text = #"{"z": 1, "a": [2], "m": "3"}"#
        let value = try JSONReader.parse(text)
        XCTAssertEqual(value.objectValue?.keys, ["z", "a", "m"])
        var reader = JSONReader(text)
        var ranges: [String: Range<Int>] = [:]
        try reader.readObject { (key, inner) throws(JSONReadError) in ranges[key] = try inner.readRawRange() }
        let bytes = Array(text.utf8)
        XCTAssertEqual(String(decoding: bytes[ranges["a"]!], as: UTF8.self), "[2]")
        XCTAssertEqual(String(decoding: bytes[ranges["m"]!], as: UTF8.self), #""3""#)
    }

    // MARK: Writer

    func testWriterEscapesAndLayout() {
        let value = JSONValue.object(JSONObject([
            "s": .string("a\"b\\c\n\r\t\u{1}\u{1F}é/"),
            "n": .number("1.50e3"),
            "l": .array([.bool(false), .null]),
            "e": .object(JSONObject()),
        ]))
        XCTAssertEqual(JSONWriter().string(value),
                       #"{"s":"a\"b\\c\n\r\t\u0001\u001fé/","n":1.50e3,"l":[false,null],"e":{}}"#)
        XCTAssertEqual(JSONWriter(indent: 4).string(.object(JSONObject(["k": .array([.number("1")])]))),
                       "{\n    \"k\": [\n        1\n    ]\n}")
        XCTAssertEqual(JSONWriter.quoted("x\"y"), #""x\"y""#)
    }

    func testWriterOutputReadsBackToTheSameValue() throws {
        let value = JSONValue.object(JSONObject([
            "text": .string("line1\nline2 \u{0} \u{7F} \u{e9} \u{1F600} \\ \""),
            "nested": .array([.object(JSONObject(["x": .number("-12.5e-3")])), .array([])]),
        ]))
        for indent in [nil, 0, 4] as [Int?] {
            XCTAssertEqual(try JSONReader.parse(JSONWriter(indent: indent).bytes(value)), value)
        }
    }

    /// The writer finds a byte to escape eight bytes at a time: one at any place, in a string of any length, is found
    /// (the text reads back as the string), and a string with none is copied as it is.
    func testWriterEscapesAByteAtAnyPlace() throws {
        var generator = SystemRandomNumberGenerator()
        let special: [UInt8] = [0x00, 0x01, 0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x1F, UInt8(ascii: "\""), UInt8(ascii: "\\")]
        for length in 0..<40 {
            var bytes = (0..<length).map { _ in UInt8.random(in: 0x20...0x7E, using: &generator) }
                .map { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") ? UInt8(ascii: "x") : $0 }
            let plain = String(decoding: bytes, as: UTF8.self)
            var out: [UInt8] = []
            JSONWriter.writeString(plain, into: &out)
            XCTAssertEqual(out, [0x22] + bytes + [0x22], "length \(length)")
            for place in 0..<length {
                bytes[place] = special.randomElement(using: &generator)!
                let text = String(decoding: bytes, as: UTF8.self)
                XCTAssertEqual(try JSONReader.parse(JSONWriter().bytes(.string(text))), .string(text), "length \(length) at \(place)")
                bytes[place] = UInt8(ascii: "y")
            }
        }
    }
}
