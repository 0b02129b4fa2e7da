@testable import BrokerJSON
import XCTest

/// The word-at-a-time readers (string runs, the escape check, base64url, plain digits, keys compared where they lie)
/// against byte-at-a-time references, with the byte that matters at every place within and across the words.
final class JSONScanningTests: XCTestCase {
    private func parsed(_ bytes: [UInt8]) -> Result<JSONValue, JSONReadError> {
        Result { () throws(JSONReadError) in try JSONReader.parse(bytes) }
    }

    /// A string of `length` plain bytes with `special` at `place`: read as the reference reads it (the text with
    /// the escape replaced, the non-ASCII kept) or refused (a control byte, invalid UTF-8).
    func testAStringIsReadWhereverItsSpecialBytesFall() throws {
        let specials: [(bytes: [UInt8], meaning: [UInt8]?)] = [
            (Array(#"\n"#.utf8), [0x0A]), (Array(#"\""#.utf8), [0x22]), (Array(#"\\"#.utf8), [0x5C]),
            (Array(#"\u00e9"#.utf8), Array("é".utf8)), (Array("é".utf8), Array("é".utf8)), (Array("漢".utf8), Array("漢".utf8)),
            ([0x01], nil), ([0x1F], nil), ([0xFF], nil), ([0xC3], nil), ([0x7F], [0x7F]), ([0x20], [0x20]),
        ]
        for length in 0...40 {
            for place in 0...length {
                for special in specials {
                    let before = (0..<place).map { UInt8(ascii: "a") + UInt8($0 % 26) }
                    let after = (place..<length).map { UInt8(ascii: "A") + UInt8($0 % 26) }
                    let text = [0x22] + before + special.bytes + after + [0x22]
                    switch parsed(text) {
                    case .success(let value):
                        let expected = try XCTUnwrap(special.meaning, "\(text) should be refused")
                        XCTAssertEqual(value, .string(String(decoding: before + expected + after, as: UTF8.self)))
                    case .failure:
                        XCTAssertNil(special.meaning, "\(text) should be read")
                    }
                }
            }
        }
    }

    /// A string with no closing quote is refused at any length (the last word is read byte by byte).
    func testAnUnterminatedStringIsRefusedAtAnyLength() {
        for length in 0...33 {
            let text = [0x22] + [UInt8](repeating: UInt8(ascii: "x"), count: length)
            guard case .failure(let error) = parsed(text) else { return XCTFail("\(length) bytes read") }
            XCTAssertEqual(error.message, "unterminated string")
        }
    }

    func testTheEscapeCheckFindsAByteAnywhere() {
        let plain = UInt8(ascii: "e")
        for length in 0...80 {
            let clean = [UInt8](repeating: plain, count: length)
            clean.withUnsafeBufferPointer { XCTAssertFalse(JSONWriter.containsByteToEscape($0)) }
            for place in 0..<length {
                for byte: UInt8 in [0x00, 0x1F, 0x22, 0x5C, 0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F, 0x80, 0xA2, 0xDC, 0xFF] {
                    var bytes = clean
                    bytes[place] = byte
                    let expected = byte < 0x20 || byte == 0x22 || byte == 0x5C
                    bytes.withUnsafeBufferPointer {
                        XCTAssertEqual(JSONWriter.containsByteToEscape($0), expected, "byte \(byte) at \(place) of \(length)")
                    }
                }
            }
        }
    }

    /// The decoder of four characters at a time against one that reads a character at a time, on encodings of random
    /// bytes, padded and not, and on each of them with a character changed, cut or padded once too often.
    func testBase64IsDecodedAsTheCharacterByCharacterDecoderDecodesIt() {
        var generator = SystemRandomNumberGenerator()
        let characters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=.!".utf8)
        for length in 0...50 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Array(Base64URL.encode(bytes).utf8)
            XCTAssertEqual(Base64URL.decode(utf8: encoded), bytes)
            var variants = [encoded, encoded + Array(repeating: UInt8(ascii: "="), count: (4 - encoded.count % 4) % 4),
                            encoded + [UInt8(ascii: "=")] * 3, encoded.dropLast().map { $0 }]
            for _ in 0..<6 where !encoded.isEmpty {
                var changed = encoded
                changed[Int.random(in: 0..<changed.count, using: &generator)] = characters.randomElement(using: &generator)!
                variants.append(changed)
            }
            for variant in variants {
                XCTAssertEqual(Base64URL.decode(utf8: variant), referenceDecode(variant), "\(String(decoding: variant, as: UTF8.self))")
                XCTAssertEqual(Base64URL.decode(utf8: variant[...]), referenceDecode(variant))
            }
        }
    }

    private func referenceDecode(_ text: [UInt8]) -> [UInt8]? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var out: [UInt8] = [], bits: UInt32 = 0, pending = 0, padding = 0
        for byte in text {
            if byte == UInt8(ascii: "=") { padding += 1; continue }
            let value: Int
            switch byte {
            case UInt8(ascii: "-"), UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "_"), UInt8(ascii: "/"): value = 63
            default:
                guard let index = alphabet.firstIndex(of: byte) else { return nil }
                value = index
            }
            guard padding == 0 else { return nil }
            bits = bits << 6 | UInt32(value)
            pending += 1
            if pending == 4 {
                out += [UInt8(truncatingIfNeeded: bits >> 16), UInt8(truncatingIfNeeded: bits >> 8), UInt8(truncatingIfNeeded: bits)]
                (bits, pending) = (0, 0)
            }
        }
        guard padding <= 2 else { return nil }
        switch pending {
        case 1: return nil
        case 2: out.append(UInt8(truncatingIfNeeded: bits >> 4))
        case 3: out += [UInt8(truncatingIfNeeded: bits >> 10), UInt8(truncatingIfNeeded: bits >> 2)]
        default: break
        }
        return out
    }

    func testOneClaimIsReadAsTheWholePayloadReadsIt() {
        let payloads = [
            #"{"preferred_username":"ann@example.com","name":"Ann"}"#, #"{"name":"Ann"}"#,
            #"{"preferred_username":42}"#, #"{"preferred_username":null}"#, #"{"preferred_username":"a","preferred_username":"b"}"#,
            #"{"preferred_\u0075sername":"escaped@example.com"}"#, #"{"x":{"preferred_username":"nested"}}"#,
            #"["preferred_username"]"#, #"{"preferred_username":"a""#, #"{"preferred_username":"é"} "#, "", "not json",
        ]
        for payload in payloads {
            for token in ["h.\(Base64URL.encode(Array(payload.utf8))).s", "h.\(Base64URL.encode(Array(payload.utf8)))",
                          "h.\(Base64URL.encode(Array(payload.utf8))).s.t", "h.!!!.s"] {
                let whole = (try? JWTPayload.claims(of: token))?["preferred_username"]?.stringValue
                XCTAssertEqual(JWTPayload.stringClaim("preferred_username", of: token), whole, payload)
            }
        }
    }

    /// Timestamps of plain digits are read without the generic parse; everything else as before.
    func testIntegerValueIsWhatTheGenericParseGives() {
        var generator = SystemRandomNumberGenerator()
        func reference(_ text: String) -> Int64? {
            let trimmed = text.trimmingSpaces
            if let exact = Int64(trimmed) { return exact }
            if let real = Double(trimmed), real.isFinite, abs(real) < 9.2e18 { return Int64(real.rounded(.down)) }
            return nil
        }
        var samples = ["0", "007", "1700000000", "999999999999999999", "9223372036854775807", "9223372036854775808",
                       "-5", "+5", " 5", "5 ", "1e3", "1.5", "", "x", "12x", "١٢"]
        for _ in 0..<500 {
            let length = Int.random(in: 1...20, using: &generator)
            samples.append(String((0..<length).map { _ in "0123456789".randomElement(using: &generator)! }))
        }
        for sample in samples {
            XCTAssertEqual(JSONValue.string(sample).integerValue, reference(sample), sample)
            XCTAssertEqual(JSONValue.number(sample).integerValue, reference(sample), sample)
        }
    }

    /// Keys compared where they lie name the same members as keys read as strings: plain, escaped, non-ASCII,
    /// absent from the table, given twice.
    func testKeysOfATableAreTheKeysReadAsStrings() throws {
        let table = JSONKeyTable(["a", "secret", "home_account_id", "extended_expires_on", "", "é"])
        let objects = [
            #"{"a":1,"secret":"s","other":[1,{"a":2}],"home_account_id":"h"}"#,
            #"{"secr\u0065t":"escaped","":0,"é":"e","\u00e9":"e2","extended_expires_on":"1"}"#,
            #"{"a":1,"a":2,"secret2":3,"secre":4,"A":5}"#, "{}",
        ]
        for object in objects {
            var byTable: [(String, JSONValue)] = [], byString: [(String, JSONValue)] = []
            var reader = JSONReader(object)
            try reader.readObject(table) { (key, reader) throws(JSONReadError) in
                switch key {
                case .name(let index): byTable.append((table.names[index], try reader.readValue()))
                case .other(let text):
                    XCTAssertNil(table.index(of: text), text)
                    byTable.append((text, try reader.readValue()))
                }
            }
            reader = JSONReader(object)
            try reader.readObject { (key, reader) throws(JSONReadError) in byString.append((key, try reader.readValue())) }
            XCTAssertEqual(byTable.map(\.0), byString.map(\.0), object)
            XCTAssertEqual(byTable.map(\.1), byString.map(\.1), object)
        }
    }

    /// Every name of a table is found by its bytes, and nothing else is: names sharing their first 16 bytes, names
    /// of 16 and 17 bytes, a name and the same bytes with a NUL after them, the empty name.
    func testATableFindsEachOfItsNamesAndNoNearMiss() {
        let names = ["extended_expires_on", "extended_expires_at", "exactly_16_bytes", "exactly_17_bytes_", "id", "",
                     "é", "clientId", "clientid"]
        let table = JSONKeyTable(names)
        for (index, name) in names.enumerated() { XCTAssertEqual(table.index(of: name), index, name) }
        for miss in ["extended_expires_o", "extended_expires_onn", "exactly_16_byteS", "exactly_17_bytes", "id\0", "i",
                     "\0", "e", "clientID", "extended_expires_ox"] {
            XCTAssertNil(table.index(of: miss), miss)
        }
        XCTAssertNil(JSONKeyTable([]).index(of: ""))
    }

    /// A value compared where it lies is read only when it is the candidate as written; anything else (another
    /// string, a longer or shorter one, the same text escaped, not a string) is left for the usual read, which then
    /// reads it whole.
    func testAStringComparedWhereItLiesIsReadOnlyWhenItIsTheCandidate() throws {
        let candidate = "c06a47ab-4fa5-4394-be5b-cdcf77d28c4b.tenant-é"
        let cases: [(value: String, equal: Bool)] = [
            (#""c06a47ab-4fa5-4394-be5b-cdcf77d28c4b.tenant-é""#, true),
            (#" "c06a47ab-4fa5-4394-be5b-cdcf77d28c4b.tenant-é""#, true),
            (#""c06a47ab-4fa5-4394-be5b-cdcf77d28c4b.tenant-e""#, false),
            (#""c06a47ab-4fa5-4394-be5b-cdcf77d28c4b.tenant""#, false),
            (#""c06a47ab-4fa5-4394-be5b-cdcf77d28c4b.tenant-éé""#, false),
            (#""c06a47ab-4fa5-4394-be5b-cdcf77d28c4b.tenant-\u00e9""#, false),
            (#""\u0063\u0030""#, false), ("42", false), ("null", false), (#""""#, false),
        ]
        for (value, equal) in cases {
            let text = #"{"v":\#(value),"w":"after"}"#
            var reader = JSONReader(text)
            var read: [JSONValue] = []
            try reader.readObject { (key, reader) throws(JSONReadError) in
                if key == "v", reader.readString(ifEqualTo: candidate) {
                    read.append(.string(candidate))
                } else {
                    XCTAssertFalse(key == "v" && equal, value)
                    read.append(try reader.readValue())
                }
            }
            XCTAssertEqual(read, [try JSONReader.parse(value), .string("after")], value)
            XCTAssertEqual(read.first == .string(candidate), equal || value.contains("\\u00e9"), value)
        }
        var empty = JSONReader(#""""#)
        XCTAssertTrue(empty.readString(ifEqualTo: ""))
    }
}

private func * (bytes: [UInt8], count: Int) -> [UInt8] {
    Array([[UInt8]](repeating: bytes, count: count).joined())
}
