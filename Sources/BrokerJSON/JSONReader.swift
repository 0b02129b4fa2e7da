#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a JSON text could not be read, with the byte offset where reading stopped.
public struct JSONReadError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var offset: Int

    public var description: String { "\(message) at byte \(offset)" }

    public init(message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }
}

/// A cursor over UTF-8 JSON text.
///
/// Callers either read whole values (`readValue`) or walk objects member by member (`readObject`) and decide per
/// member whether to interpret the value or keep it verbatim (`readRaw`). That is how the cache keeps unknown
/// sections and fields byte-for-byte while interpreting the fields it knows.
///
/// `lenient` accepts what other SDKs' cache files contain in the wild: a UTF-8 byte-order mark and trailing commas.
/// Invalid UTF-8 is always an error.
public struct JSONReader {
    public static let maximumDepth = 256

    private let bytes: [UInt8]
    private var position: Int
    private let lenient: Bool
    private var depth = 0

    public init(_ bytes: [UInt8], lenient: Bool = false) {
        self.bytes = bytes
        self.lenient = lenient
        var start = 0
        if lenient, bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { start = 3 }
        self.position = start
    }

    public init(_ text: String, lenient: Bool = false) {
        self.init(Array(text.utf8), lenient: lenient)
    }

    /// Parses one complete JSON text (nothing but whitespace may follow it).
    public static func parse(_ bytes: [UInt8], lenient: Bool = false) throws(JSONReadError) -> JSONValue {
        var reader = JSONReader(bytes, lenient: lenient)
        let value = try reader.readValue()
        try reader.expectEnd()
        return value
    }

    public static func parse(_ text: String, lenient: Bool = false) throws(JSONReadError) -> JSONValue {
        try parse(Array(text.utf8), lenient: lenient)
    }

    // MARK: - Structure

    public enum Kind: Sendable { case object, array, string, number, bool, null }

    @inline(__always)
    public mutating func peekKind() throws(JSONReadError) -> Kind {
        skipWhitespace()
        guard position < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        default: throw fail("unexpected character")
        }
    }

    /// Walks an object, handing each key and the reader (positioned at the member's value) to `member`,
    /// which must consume exactly one value.
    public mutating func readObject(_ member: (String, inout JSONReader) throws(JSONReadError) -> Void) throws(JSONReadError) {
        try walkObject({ (reader) throws(JSONReadError) in try reader.readString() }, member)
    }

    /// An object's members, each key read by `readKey` (a String, or which of the keys asked for) and handed to
    /// `member` with the reader at its value.
    // Inlined into each reader of objects, so that its `readKey` is too: a call per key and per member was a large
    // part of reading a request line.
    @inline(__always)
    private mutating func walkObject<Key>(_ readKey: (inout JSONReader) throws(JSONReadError) -> Key,
                                          _ member: (Key, inout JSONReader) throws(JSONReadError) -> Void)
        throws(JSONReadError) {
        try enter()
        try expect(UInt8(ascii: "{"))
        skipWhitespace()
        if consume(UInt8(ascii: "}")) { depth -= 1; return }
        while true {
            skipWhitespace()
            let key = try readKey(&self)
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            try member(key, &self)
            skipWhitespace()
            if consume(UInt8(ascii: ",")) {
                skipWhitespace()
                if lenient, consume(UInt8(ascii: "}")) { break }
                continue
            }
            try expect(UInt8(ascii: "}"))
            break
        }
        depth -= 1
    }

    public mutating func readArray(_ element: (inout JSONReader) throws(JSONReadError) -> Void) throws(JSONReadError) {
        try enter()
        try expect(UInt8(ascii: "["))
        skipWhitespace()
        if consume(UInt8(ascii: "]")) { depth -= 1; return }
        while true {
            try element(&self)
            skipWhitespace()
            if consume(UInt8(ascii: ",")) {
                skipWhitespace()
                if lenient, consume(UInt8(ascii: "]")) { break }
                continue
            }
            try expect(UInt8(ascii: "]"))
            break
        }
        depth -= 1
    }

    public mutating func readValue() throws(JSONReadError) -> JSONValue {
        switch try peekKind() {
        case .object:
            var object = JSONObject()
            try readObject { (key, reader) throws(JSONReadError) in
                object.members.append(.init(key: key, value: try reader.readValue()))
            }
            return .object(object)
        case .array:
            var elements: [JSONValue] = []
            try readArray { (reader) throws(JSONReadError) in elements.append(try reader.readValue()) }
            return .array(elements)
        case .string:
            return .string(try readString())
        case .number:
            return .number(try readNumber())
        case .bool:
            if consumeLiteral("true") { return .bool(true) }
            if consumeLiteral("false") { return .bool(false) }
            throw fail("invalid literal")
        case .null:
            if consumeLiteral("null") { return .null }
            throw fail("invalid literal")
        }
    }

    /// Thrown by `readMembers` for a member of interest given twice: readers that build values keep the last or the
    /// first, so a caller that reads in one pass leaves such an object to them.
    public static let repeatedMember = JSONReadError(message: "a member given twice", offset: -1)

    /// Walks an object for the members named in `keys` (at most 64): each is handed to `member` with its index in
    /// `keys`, the reader at its value (which `member` must consume); every other member is validated and skipped.
    /// A member of `keys` given twice throws `repeatedMember`.
    public mutating func readMembers(_ keys: JSONKeyTable, _ member: (Int, inout JSONReader) throws(JSONReadError) -> Void)
        throws(JSONReadError) {
        var seen: UInt64 = 0
        try walkObject({ (reader) throws(JSONReadError) in try reader.readKeyIndex(in: keys) }) { (index, reader) throws(JSONReadError) in
            guard let index else { return try reader.skipValue() }
            guard seen & (1 << index) == 0 else { throw Self.repeatedMember }
            seen |= 1 << index
            try member(index, &reader)
        }
    }

    /// `readMembers` with the names in an array (a table made for this one object).
    public mutating func readMembers(_ keys: [String], _ member: (Int, inout JSONReader) throws(JSONReadError) -> Void)
        throws(JSONReadError) {
        try readMembers(JSONKeyTable(keys), member)
    }

    /// Walks an object as `readObject` does, each key matched against `names` where it lies: a key of the table comes
    /// as its index (no String made), any other as read.
    public mutating func readObject(_ names: JSONKeyTable, _ member: (MemberKey, inout JSONReader) throws(JSONReadError) -> Void)
        throws(JSONReadError) {
        try walkObject({ (reader) throws(JSONReadError) in try reader.readKey(in: names) }, member)
    }

    /// Which of `names` the member's key is: a plain ASCII key without escapes is compared where it lies (making each
    /// key a String cost more than skipping its value); any other is read as `readString` reads it, with its errors.
    private mutating func readKey(in names: JSONKeyTable) throws(JSONReadError) -> MemberKey {
        if position < bytes.count, bytes[position] == UInt8(ascii: "\"") {
            let run = scanRun(from: position + 1)
            if !run.nonASCII, run.end < bytes.count, bytes[run.end] == UInt8(ascii: "\"") {
                let start = position + 1, end = run.end
                let found = bytes.withUnsafeBytes { names.index(of: UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
                if let found {
                    position = end + 1
                    return .name(found)
                }
            }
        }
        let key = try readString()
        return names.index(of: key).map(MemberKey.name) ?? .other(key)
    }

    /// `readKey` for a reader of some members only (`readMembers`): a plain ASCII key not in `names` is stepped over,
    /// not made a String to be dropped (a broker1 request has some thirty keys brokerd does not read).
    @inline(__always)
    private mutating func readKeyIndex(in names: JSONKeyTable) throws(JSONReadError) -> Int? {
        if position < bytes.count, bytes[position] == UInt8(ascii: "\"") {
            let run = scanRun(from: position + 1)
            if !run.nonASCII, run.end < bytes.count, bytes[run.end] == UInt8(ascii: "\"") {
                let start = position + 1, end = run.end
                position = end + 1
                return bytes.withUnsafeBytes { names.index(of: UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
            }
        }
        return names.index(of: try readString())
    }

    /// A key of an object being skipped: stepped over as `skipString` steps over a string.
    private mutating func skipKey() throws(JSONReadError) {
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
            _ = try readString()  // which says what is there instead
            return
        }
        try skipString()
    }

    /// Validates one value and moves past it, keeping nothing: what `readValue` accepts, this accepts, and throws
    /// where it throws, without building a string or a container for a member the caller does not want.
    public mutating func skipValue() throws(JSONReadError) {
        switch try peekKind() {
        case .object:
            try walkObject({ (reader) throws(JSONReadError) in try reader.skipKey() }) { (_, reader) throws(JSONReadError) in
                try reader.skipValue()
            }
        case .array: try readArray { (reader) throws(JSONReadError) in try reader.skipValue() }
        case .string: try skipString()
        case .number: _ = try readNumber()
        case .bool, .null: _ = try readValue()
        }
    }

    /// Reads the string value at the reader when it is `candidate` as written (no escape in it) and returns true;
    /// leaves anything else unread and returns false. Compared where it lies, no String made: a load compares an
    /// entry's repeated values (its account, environment, client, realm, target) with the entry before's this way.
    public mutating func readString(ifEqualTo candidate: String) -> Bool {
        skipWhitespace()
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { return false }
        let start = position + 1, end = scanRun(from: start).end
        guard end < bytes.count, bytes[end] == UInt8(ascii: "\""), candidate.utf8.count == end - start else {
            return false
        }
        let equal = candidate.utf8.withContiguousStorageIfAvailable { text in
            text.isEmpty
                || bytes.withUnsafeBufferPointer { memcmp(text.baseAddress!, $0.baseAddress! + start, text.count) == 0 }
        } ?? candidate.utf8.elementsEqual(bytes[start..<end])
        guard equal else { return false }
        position = end + 1
        return true
    }

    /// A plain ASCII string without escapes is scanned past; anything else (an escape, a byte to validate, an error)
    /// is read by `readString`, which checks it.
    private mutating func skipString() throws(JSONReadError) {
        let run = scanRun(from: position + 1)
        if !run.nonASCII, run.end < bytes.count, bytes[run.end] == UInt8(ascii: "\"") {
            position = run.end + 1
            return
        }
        _ = try readString()
    }

    /// Where the run of string bytes from `start` ends (at a quote, a backslash, a control character or the end of
    /// the input), and whether a byte of it is 0x80 or above. One pass over the bytes without bounds checks: scanning
    /// strings is most of what reading JSON costs, and tokens are kilobytes long.
    private func scanRun(from start: Int) -> (end: Int, nonASCII: Bool) {
        bytes.withUnsafeBufferPointer { buffer in
            var index = start, high: UInt64 = 0
            let raw = UnsafeRawBufferPointer(buffer)
            // Eight bytes at a time: the lowest flagged byte of a word is the first that ends the run.
            while index + 8 <= buffer.count {
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                let flags = JSONWriter.escapeFlags(word)
                if flags != 0 {
                    let before = flags.trailingZeroBitCount / 8
                    high |= before == 0 ? 0 : word & (~0 >> (64 - 8 * UInt64(before)))
                    return (index + before, high & 0x8080_8080_8080_8080 != 0)
                }
                high |= word
                index += 8
            }
            var highByte: UInt8 = high & 0x8080_8080_8080_8080 != 0 ? 0x80 : 0
            while index < buffer.count {
                let byte = buffer[index]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                highByte |= byte
                index += 1
            }
            return (index, highByte >= 0x80)
        }
    }

    /// Validates one value and returns its exact text.
    public mutating func readRaw() throws(JSONReadError) -> String {
        skipWhitespace()
        let start = position
        _ = try readValue()
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    /// The byte range of the next value, validated (used by the JSON-RPC envelope to hand params to a decoder).
    public mutating func readRawRange() throws(JSONReadError) -> Range<Int> {
        skipWhitespace()
        let start = position
        _ = try readValue()
        return start..<position
    }

    public mutating func expectEnd() throws(JSONReadError) {
        skipWhitespace()
        if position != bytes.count { throw fail("unexpected data after the JSON value") }
    }

    public var offset: Int { position }

    /// How many bytes are left to read.
    public var remaining: Int { bytes.count - position }

    // MARK: - Scalars

    public mutating func readString() throws(JSONReadError) -> String {
        try expect(UInt8(ascii: "\""))
        var output: [UInt8] = []
        var escaped = false
        // Bytes of 0x80 and up were seen in the string as written: only then is there UTF-8 to validate (escapes
        // write valid UTF-8). Most strings are ASCII, and validation is most of what reading one costs.
        var nonASCII = false
        var runStart = position
        while true {
            let run = scanRun(from: position)
            position = run.end
            if run.nonASCII { nonASCII = true }
            guard position < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                defer { position += 1 }
                if !escaped, !nonASCII { return String(decoding: bytes[runStart..<position], as: UTF8.self) }
                output.append(contentsOf: bytes[runStart..<position])
                break
            }
            if byte < 0x20 { throw fail("control character in string") }
            // A backslash: the only other byte a run stops at.
            escaped = true
            output.append(contentsOf: bytes[runStart..<position])
            position += 1
            try readEscape(into: &output)
            runStart = position
        }
        if !nonASCII { return String(decoding: output, as: UTF8.self) }
        guard let text = String(validating: output, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
        return text
    }

    private mutating func readEscape(into output: inout [UInt8]) throws(JSONReadError) {
        guard position < bytes.count else { throw fail("unterminated escape") }
        let escaped = bytes[position]
        position += 1
        switch escaped {
        case UInt8(ascii: "\""): output.append(0x22)
        case UInt8(ascii: "\\"): output.append(0x5C)
        case UInt8(ascii: "/"): output.append(0x2F)
        case UInt8(ascii: "b"): output.append(0x08)
        case UInt8(ascii: "f"): output.append(0x0C)
        case UInt8(ascii: "n"): output.append(0x0A)
        case UInt8(ascii: "r"): output.append(0x0D)
        case UInt8(ascii: "t"): output.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try readHex4()
            if (0xD800...0xDBFF).contains(scalar) {
                guard consume(UInt8(ascii: "\\")), consume(UInt8(ascii: "u")) else { throw fail("unpaired surrogate") }
                let low = try readHex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid surrogate pair") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw fail("unpaired surrogate")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid unicode escape") }
            output.append(contentsOf: Array(String(Character(unicode)).utf8))
        default:
            throw fail("invalid escape")
        }
    }

    private mutating func readHex4() throws(JSONReadError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("truncated unicode escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit")
            }
            value = value << 4 | digit
            position += 1
        }
        return value
    }

    private mutating func readNumber() throws(JSONReadError) -> String {
        let start = position
        _ = consume(UInt8(ascii: "-"))
        if consume(UInt8(ascii: "0")) {
            // a leading zero stands alone
        } else if try consumeDigits() == 0 {
            throw fail("invalid number")
        }
        if consume(UInt8(ascii: ".")) {
            if try consumeDigits() == 0 { throw fail("invalid number") }
        }
        if consume(UInt8(ascii: "e")) || consume(UInt8(ascii: "E")) {
            if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
            if try consumeDigits() == 0 { throw fail("invalid number") }
        }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    private mutating func consumeDigits() throws(JSONReadError) -> Int {
        var count = 0
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
            position += 1
            count += 1
        }
        return count
    }

    // MARK: - Helpers

    private mutating func enter() throws(JSONReadError) {
        depth += 1
        if depth > Self.maximumDepth { throw fail("nesting deeper than \(Self.maximumDepth)") }
    }

    /// Inlined for a request line's usual case, no whitespace (clients write compact JSON); a run of it (a document
    /// written with indentation) is stepped over out of line, as all of it was before.
    @inline(__always)
    private mutating func skipWhitespace() {
        if position < bytes.count, bytes[position] > 0x20 { return }
        skipWhitespaceRun()
    }

    @inline(never)
    private mutating func skipWhitespaceRun() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func consume(_ byte: UInt8) -> Bool {
        if position < bytes.count, bytes[position] == byte {
            position += 1
            return true
        }
        return false
    }

    private mutating func consumeLiteral(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard position + count <= bytes.count else { return false }
        let matches = literal.withUTF8Buffer { expected in
            (0..<count).allSatisfy { bytes[position + $0] == expected[$0] }
        }
        if matches { position += count }
        return matches
    }

    @inline(__always)
    private mutating func expect(_ byte: UInt8) throws(JSONReadError) {
        skipWhitespace()
        guard consume(byte) else { throw missing(byte) }
    }

    /// Out of line: the message is built only for an error, and a caller's inlined `expect` stays a compare.
    @inline(never)
    private func missing(_ byte: UInt8) -> JSONReadError {
        fail(position < bytes.count ? "expected '\(Character(Unicode.Scalar(byte)))'" : "unexpected end of input")
    }

    @inline(never)
    private func fail(_ message: String) -> JSONReadError {
        JSONReadError(message: message, offset: position)
    }
}
