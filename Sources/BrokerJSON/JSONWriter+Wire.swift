/// The JSON-RPC wire's writer: compact text with strings escaped exactly as JSONEncoder escapes them (`\b` and
/// `\f` included, `/` left alone), so that answers keep the bytes they had when JSONEncoder wrote them.
///
/// It copies unescaped runs of a string in one go and sizes its buffer up front: answers carry kilobytes of
/// tokens, and the byte-at-a-time `JSONWriter.write` spent most of an answer's encoding time on them.
extension JSONWriter {
    /// Compact JSON text (no raw newline; `.raw` values as `write` treats them in compact mode).
    public static func wireBytes(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        let estimate = estimatedCount(value)
        out.reserveCapacity(estimate + estimate / 16)
        writeWire(value, into: &out)
        return out
    }

    public static func writeWire(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let bool): out.append(contentsOf: (bool ? "true" : "false").utf8)
        case .number(let literal): out.append(contentsOf: literal.utf8)
        case .string(let string): writeWireString(string, into: &out)
        case .raw:
            JSONWriter().write(value, into: &out, level: 0)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeWire(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeWireString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                writeWire(member.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// What `writeWire(JSONValueEncoder().encode(value))` writes: the encoder's canonical form (members sorted, the
    /// last of equal keys kept, numbers as the encoder writes them), without making the canonical tree first. An
    /// account's text carries its id token's claims so, and the tree was a twelfth of the account's first hit.
    public static func writeCanonicalWire(_ value: JSONValue, into out: inout [UInt8]) throws {
        switch value {
        case .null, .bool, .string:
            writeWire(value, into: &out)
        case .number(let literal) where Int64(literal).map({ String($0) == literal }) == true:
            out.append(contentsOf: literal.utf8)
        case .number, .raw:
            writeWire(try ValueEncoder.canonical(value, sortedKeys: true, at: { .root }), into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try writeCanonicalWire(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            var members = object.members
            ObjectBox.order(&members, sortedKeys: true)
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeWireString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                try writeCanonicalWire(member.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// An integer as `String(value)` writes it, without making the String (a cache hit's answer has two or three).
    public static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        // Written backwards on the stack (a sign and 19 digits at most), then appended at once: appending the digits'
        // room as repeated zeros went through the generic sequence path, most of what writing a number cost.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var index = buffer.count, rest = value.magnitude
            repeat {
                index -= 1
                buffer[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            if value < 0 {
                index -= 1
                buffer[index] = UInt8(ascii: "-")
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[index...]))
        }
    }

    /// A quoted string, escaped as JSONEncoder does: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other control
    /// characters as `\u00xx`; everything else (`/`, non-ASCII) as it is.
    public static func writeWireString(_ string: String, into out: inout [UInt8]) {
        // Read where it lies (`withUTF8` wants a copy it may make contiguous: a retain and a release per string).
        if string.utf8.withContiguousStorageIfAvailable({ writeWireString($0, into: &out) }) == nil {
            var string = string  // a bridged or lazy string, made contiguous
            string.withUTF8 { writeWireString($0, into: &out) }
        }
    }

    private static func writeWireString(_ utf8: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var runStart = 0
        var index = 0
        while index < utf8.count {
            // Eight bytes at a time while none of them needs escaping (tokens never do).
            if index + 8 <= utf8.count,
               escapeFlags(UnsafeRawBufferPointer(utf8).loadUnaligned(fromByteOffset: index, as: UInt64.self)) == 0 {
                index += 8
                continue
            }
            let byte = utf8[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                if runStart < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
                appendEscape(byte, into: &out)
                runStart = index + 1
            }
            index += 1
        }
        if runStart < utf8.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether `string` goes into JSON as it lies, between quotes: no byte of it needs an escape.
    package static func needsNoEscape(_ string: String) -> Bool {
        var string = string
        return string.withUTF8 { !containsByteToEscape($0) }
    }

    /// Whether any byte is a control character, `"` or `\`: 32 bytes at a time, as four words tested without a
    /// branch between them (a token is a few kilobytes; a load checks every one).
    package static func containsByteToEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let raw = UnsafeRawBufferPointer(bytes)
        func word(_ offset: Int) -> UInt64 { raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
        while index + 32 <= bytes.count {
            let flags = escapeFlags(word(index)) | escapeFlags(word(index + 8)) | escapeFlags(word(index + 16))
                | escapeFlags(word(index + 24))
            if flags != 0 { return true }
            index += 32
        }
        while index + 8 <= bytes.count {
            if escapeFlags(word(index)) != 0 { return true }
            index += 8
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return true }
            index += 1
        }
        return false
    }

    /// Not zero when any of eight bytes is a control character, `"` or `\` (the classic "has a byte less than n" and
    /// "has a zero byte" word tests; exact as to whether there is one, which is all that is asked).
    static func escapeFlags(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let quotes = word ^ (ones &* 0x22), backslashes = word ^ (ones &* 0x5C)
        let control = (word &- ones &* 0x20) & ~word
        return (control | ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)) & highs
    }

    private static func appendEscape(_ byte: UInt8, into out: inout [UInt8]) {
        let backslash = UInt8(ascii: "\\")
        switch byte {
        case UInt8(ascii: "\""), backslash: out.append(backslash); out.append(byte)
        case 0x08: out.append(backslash); out.append(UInt8(ascii: "b"))
        case 0x0C: out.append(backslash); out.append(UInt8(ascii: "f"))
        case 0x0A: out.append(backslash); out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(backslash); out.append(UInt8(ascii: "r"))
        case 0x09: out.append(backslash); out.append(UInt8(ascii: "t"))
        default:
            out.append(contentsOf: [backslash, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            out.append(hexDigit(byte >> 4))
            out.append(hexDigit(byte & 0xF))
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// The length of the text without escapes (a lower bound, cheap: a String knows its UTF-8 count).
    private static func estimatedCount(_ value: JSONValue) -> Int {
        switch value {
        case .null, .bool: return 5
        case .number(let literal): return literal.utf8.count
        case .string(let string): return string.utf8.count + 2
        case .raw(let text): return text.utf8.count
        case .array(let elements): return elements.reduce(2) { $0 + estimatedCount($1) + 1 }
        case .object(let object): return object.members.reduce(2) { $0 + $1.key.utf8.count + 4 + estimatedCount($1.value) }
        }
    }
}
