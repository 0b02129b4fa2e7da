import BrokerJSON
import BrokerProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where a request line's `id` value and its `params.correlationId` value lie, found by one pass that follows
/// JSON's structure (strings, escapes, nesting) without building anything.
///
/// What it is for: two lines that are byte for byte the same outside these two values are the same request from
/// the same app, asked again. `key` is the line with both values cut out (a 0x00 marks each cut: it cannot occur in
/// valid JSON, so two keys are equal only when the cuts sit in the same places). When one line parsed as a valid
/// request, another line with the same key is that request with its own id and correlation id, provided those two
/// values are valid themselves (`id`, `correlationId` check them).
///
/// Conservative by design: a line it is not sure of gives nil (not a top-level object, a key of the top level or
/// of params written with an escape, a duplicate `id` or `correlationId`, an id or correlation id that is an object
/// or an array, anything malformed). nil only means "parse it the usual way".
public struct RequestLineShape: Sendable {
    /// The line less the two values. Its hash is worked out once, when the key is made (`ByteDigest`): a lookup
    /// hashes a whole line, and SipHash over a few hundred bytes costs more than the rest of the lookup. (The lines
    /// come from the user's own processes, and the memo is small and starts again when full, so a weaker hash cannot
    /// be used to slow anyone else down.)
    public struct Key: Hashable, Sendable {
        public let bytes: [UInt8]
        private let digest: UInt64

        init(bytes: [UInt8]) {
            self.bytes = bytes
            digest = bytes.withUnsafeBytes(ByteDigest.of)
        }

        public func hash(into hasher: inout Hasher) { hasher.combine(digest) }
        public func _rawHashValue(seed: Int) -> Int { ByteDigest.tableHash(digest, seed: seed) }

        public static func == (a: Key, b: Key) -> Bool {
            guard a.digest == b.digest, a.bytes.count == b.bytes.count else { return false }
            return a.bytes.withUnsafeBytes { x in
                b.bytes.withUnsafeBytes { y in x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
            }
        }
    }

    public let key: Key
    /// The line the shape was made from (the caller's array, not a copy): the two values are read from it.
    private let line: [UInt8]
    /// Where the two values lie in the line the shape was made from (for `RepeatedRequestPattern`).
    let idRange: Range<Int>
    let correlationIdRange: Range<Int>?

    /// The id as `RPCEnvelope` keeps it (its raw JSON text); nil when it is not a string, a number or null.
    public var id: String? {
        let idText = line[idRange]
        // The usual ids (a small integer, a string without escapes) need no parser.
        if Self.isPlainInteger(idText) || Self.plainStringContent(idText) != nil { return String(decoding: idText, as: UTF8.self) }
        guard let value = try? JSONReader.parse(Array(idText)) else { return nil }
        switch value {
        case .string, .number, .null: return String(decoding: idText, as: UTF8.self)
        default: return nil
        }
    }

    /// `.some(nil)` for no correlation id (absent or null), `.some(text)` for a string, nil when it is anything else.
    public var correlationId: String?? {
        guard let range = correlationIdRange else { return .some(nil) }
        let text = line[range]
        if let content = Self.plainStringContent(text) { return .some(String(decoding: content, as: UTF8.self)) }
        switch try? JSONReader.parse(Array(text)) {
        case .string(let value)?: return .some(value)
        case .null?: return .some(nil)
        default: return nil
        }
    }

    /// "0" or digits without a leading zero, at most 15 of them (so that the parser would read the same number).
    static func isPlainInteger<Text: Collection<UInt8>>(_ text: Text) -> Bool {
        guard let first = text.first, text.count <= 15, first != UInt8(ascii: "0") || text.count == 1 else { return false }
        return text.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// The content of a JSON string written without escapes (the scan has already refused control characters).
    private static func plainStringContent(_ text: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        guard text.count >= 2, text.first == UInt8(ascii: "\""), text.last == UInt8(ascii: "\"") else { return nil }
        let content = text[(text.startIndex + 1)..<(text.endIndex - 1)]
        guard !content.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 < 0x20 }),
              String(validating: content, as: UTF8.self) != nil
        else { return nil }
        return content
    }

    public init?(_ line: [UInt8]) {
        guard let ranges = line.withUnsafeBufferPointer({ buffer -> (id: Range<Int>, correlationId: Range<Int>?)? in
            var scanner = Scanner(buffer)
            return scanner.scan()
        }) else { return nil }
        self.init(line, id: ranges.id, correlationId: ranges.correlationId)
    }

    /// The shape with the two values where they are known to lie (`RepeatedRequestPattern.shape(of:)`).
    init(_ line: [UInt8], id idRange: Range<Int>, correlationId correlationIdRange: Range<Int>?) {
        var cuts = [idRange]
        if let correlationId = correlationIdRange {
            if correlationId.lowerBound < idRange.lowerBound {
                cuts.insert(correlationId, at: 0)
            } else {
                cuts.append(correlationId)
            }
        }
        var key: [UInt8] = []
        key.reserveCapacity(line.count)
        var cursor = 0
        for range in cuts {
            key += line[cursor..<range.lowerBound]
            key.append(0)
            cursor = range.upperBound
        }
        key += line[cursor...]
        self.key = Key(bytes: key)
        self.line = line
        self.idRange = idRange
        self.correlationIdRange = correlationIdRange
    }

    /// Walks the line once. Works on the line's buffer and keeps no heap state (this runs for every request, before
    /// anything else): per open container, two bits say whether it is an object and whether its current member's key
    /// has been read; the keys themselves matter only at the top level and in params, so only those are kept.
    struct Scanner {
        let line: UnsafeBufferPointer<UInt8>
        var i = 0
        var depth = 0  // open containers
        var objects: UInt64 = 0, keyed: UInt64 = 0  // bit d - 1: the container at depth d is an object / has its key
        var topKey: Range<Int>?, paramsKey: Range<Int>?  // the current member's key at depth 1 / in params
        var id: Range<Int>?, correlationId: Range<Int>?
        var inParams = false  // params is an object, open at depth 2
        var sawParams = false

        init(_ line: UnsafeBufferPointer<UInt8>) { self.line = line }

        /// Deeper lines are left to the parser (bits of one UInt64 per property).
        private static let maxDepth = 63

        private func key(_ range: Range<Int>?, is name: StaticString) -> Bool {
            guard let range, range.count == name.utf8CodeUnitCount else { return false }
            return memcmp(line.baseAddress! + range.lowerBound, name.utf8Start, range.count) == 0
        }

        private func bit(_ d: Int) -> UInt64 { 1 << UInt64(d - 1) }
        private var isObject: Bool { objects & bit(depth) != 0 }
        private var hasKey: Bool { keyed & bit(depth) != 0 }

        mutating func scan() -> (id: Range<Int>, correlationId: Range<Int>?)? {
            skipSpace()
            guard i < line.count, line[i] == UInt8(ascii: "{") else { return nil }
            while true {
                skipSpace()
                guard i < line.count else { return nil }
                let byte = line[i]
                switch byte {
                case UInt8(ascii: "\""):
                    let start = i
                    guard let (end, plain) = skipString() else { return nil }
                    if isObject, !hasKey {
                        keyed |= bit(depth)
                        if depth == 1 { topKey = (start + 1)..<(end - 1) }
                        if depth == 2 { paramsKey = (start + 1)..<(end - 1) }
                        // Keys that matter must be read as written: an escaped one could spell "id".
                        if !plain, depth == 1 || (depth == 2 && inParams) { return nil }
                    } else if !noteValue(start: start, end: end) {
                        return nil
                    }
                case UInt8(ascii: ","):
                    if isObject { keyed &= ~bit(depth) }
                    i += 1
                case UInt8(ascii: ":"):
                    guard isObject, hasKey else { return nil }
                    i += 1
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    guard depth < Self.maxDepth, noteValue(start: i, end: nil) else { return nil }
                    if depth == 1, key(topKey, is: "params") {
                        guard !sawParams else { return nil }  // the parser keeps the last; this would cut the first
                        sawParams = true
                        inParams = byte == UInt8(ascii: "{")
                    }
                    depth += 1
                    if byte == UInt8(ascii: "{") { objects |= bit(depth) } else { objects &= ~bit(depth) }
                    keyed &= ~bit(depth)
                    if depth == 2 { paramsKey = nil }
                    i += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    guard depth > 0, isObject == (byte == UInt8(ascii: "}")) else { return nil }
                    if depth == 2 { inParams = false }
                    depth -= 1
                    i += 1
                    if depth == 0 {
                        skipSpace()
                        guard i == line.count, let id else { return nil }
                        return (id, correlationId)
                    }
                default:
                    let start = i
                    while i < line.count, !Self.ends(line[i]) { i += 1 }
                    guard i > start, noteValue(start: start, end: i) else { return nil }
                }
            }
        }

        /// Records a value's range when it is the top level's id or params' correlationId. `end` nil: a container,
        /// which neither may be. False: the line is not one this shape can stand for.
        private mutating func noteValue(start: Int, end: Int?) -> Bool {
            guard depth > 0, isObject else { return true }
            guard hasKey else { return false }  // a value where a key belongs
            if depth == 1, key(topKey, is: "id") {
                guard id == nil, let end else { return false }
                id = start..<end
            } else if depth == 2, inParams, key(paramsKey, is: "correlationId") {
                guard correlationId == nil, let end else { return false }
                correlationId = start..<end
            }
            return true
        }

        /// Past a string that starts at `i`: the index after its closing quote, and whether it had no escape.
        /// Most of a line is string content, so it is read 8 bytes at a time: a word with no quote, backslash or
        /// control character is skipped whole, and in one that has some the scan goes straight to the first.
        private mutating func skipString() -> (end: Int, plain: Bool)? {
            let bytes = UnsafeRawPointer(line.baseAddress!), count = line.count
            var j = i + 1, plain = true
            while j < count {
                if j + 8 <= count {
                    let special = Self.specialBytes(bytes.loadUnaligned(fromByteOffset: j, as: UInt64.self))
                    if special == 0 {
                        j += 8
                        continue
                    }
                    j += special.trailingZeroBitCount >> 3
                }
                let byte = line[j]
                if byte == UInt8(ascii: "\"") {
                    i = j + 1
                    return (i, plain)
                }
                if byte == UInt8(ascii: "\\") {
                    plain = false
                    j += 2
                } else if byte < 0x20 {
                    return nil  // a control character
                } else {
                    j += 1
                }
            }
            return nil
        }

        /// The high bit of each of 8 bytes (little-endian) that is a quote, a backslash or below 0x20: the classic
        /// has-zero-byte test, applied to the word xor each byte and to the word less 0x20. A flag can be false only
        /// above a true one (a borrow runs upward), so the lowest flag is exact; zero means none of the 8 is.
        static func specialBytes(_ word: UInt64) -> UInt64 {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let quotes = word ^ 0x2222_2222_2222_2222, backslashes = word ^ 0x5C5C_5C5C_5C5C_5C5C
            let zeroes = ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)
                | ((word &- 0x2020_2020_2020_2020) & ~word)
            return zeroes & 0x8080_8080_8080_8080
        }

        private mutating func skipSpace() {
            while i < line.count, line[i] == 0x20 || line[i] == 0x09 || line[i] == 0x0A || line[i] == 0x0D { i += 1 }
        }

        static func ends(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[")
                || byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
        }
    }
}
