import BrokerJSON

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
    /// The line less the two values: hashed a buffer at a time (an answer lookup hashes a whole line).
    public struct Key: Hashable, Sendable {
        public let bytes: [UInt8]

        public func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    public let key: Key
    private let idText: [UInt8]
    private let correlationIdText: [UInt8]?

    /// The id as `RPCEnvelope` keeps it (its raw JSON text); nil when it is not a string, a number or null.
    public var id: String? {
        guard let value = try? JSONReader.parse(idText) else { return nil }
        switch value {
        case .string, .number, .null: return String(decoding: idText, as: UTF8.self)
        default: return nil
        }
    }

    /// `.some(nil)` for no correlation id (absent or null), `.some(text)` for a string, nil when it is anything else.
    public var correlationId: String?? {
        guard let text = correlationIdText else { return .some(nil) }
        switch try? JSONReader.parse(text) {
        case .string(let value)?: return .some(value)
        case .null?: return .some(nil)
        default: return nil
        }
    }

    public init?(_ line: [UInt8]) {
        var scanner = Scanner(line)
        guard let ranges = scanner.scan() else { return nil }
        var key: [UInt8] = []
        key.reserveCapacity(line.count)
        var cursor = 0
        for range in [ranges.id, ranges.correlationId].compactMap({ $0 }).sorted(by: { $0.lowerBound < $1.lowerBound }) {
            key += line[cursor..<range.lowerBound]
            key.append(0)
            cursor = range.upperBound
        }
        key += line[cursor...]
        self.key = Key(bytes: key)
        idText = Array(line[ranges.id])
        correlationIdText = ranges.correlationId.map { Array(line[$0]) }
    }

    private struct Scanner {
        let line: [UInt8]
        var i = 0

        init(_ line: [UInt8]) { self.line = line }

        /// One frame per open container: for an object, the key of the member being read (nil while reading a key).
        private struct Frame {
            var isObject: Bool
            var key: ArraySlice<UInt8>?
        }

        mutating func scan() -> (id: Range<Int>, correlationId: Range<Int>?)? {
            var stack: [Frame] = []
            var id: Range<Int>?, correlationId: Range<Int>?
            var paramsDepth: Int?  // the stack depth of the params object while it is open
            var sawParams = false
            skipSpace()
            guard i < line.count, line[i] == UInt8(ascii: "{") else { return nil }
            while true {
                skipSpace()
                guard i < line.count else { return nil }
                let byte = line[i]
                switch byte {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    if !stack.isEmpty, !noteValue(stack, start: i, end: nil, &id, &correlationId, paramsDepth) { return nil }
                    if stack.count == 1, stack[0].key?.elementsEqual("params".utf8) == true {
                        guard !sawParams else { return nil }  // the parser keeps the last; this would cut the first
                        sawParams = true
                        if byte == UInt8(ascii: "{") { paramsDepth = 2 }
                    }
                    stack.append(Frame(isObject: byte == UInt8(ascii: "{")))
                    i += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    guard let top = stack.popLast(), top.isObject == (byte == UInt8(ascii: "}")) else { return nil }
                    if paramsDepth == stack.count + 1 { paramsDepth = nil }
                    i += 1
                    if stack.isEmpty {
                        skipSpace()
                        guard i == line.count, let id else { return nil }
                        return (id, correlationId)
                    }
                case UInt8(ascii: ","):
                    if stack[stack.count - 1].isObject { stack[stack.count - 1].key = nil }
                    i += 1
                case UInt8(ascii: ":"):
                    guard stack[stack.count - 1].isObject, stack[stack.count - 1].key != nil else { return nil }
                    i += 1
                case UInt8(ascii: "\""):
                    let start = i
                    guard let (end, plain) = skipString() else { return nil }
                    if stack[stack.count - 1].isObject, stack[stack.count - 1].key == nil {
                        stack[stack.count - 1].key = line[(start + 1)..<(end - 1)]
                        // Keys that matter must be read as written: an escaped one could spell "id".
                        if !plain, stack.count == 1 || stack.count == paramsDepth { return nil }
                    } else if !noteValue(stack, start: start, end: end, &id, &correlationId, paramsDepth) {
                        return nil
                    }
                default:
                    let start = i
                    while i < line.count, !Self.ends(line[i]) { i += 1 }
                    guard i > start, noteValue(stack, start: start, end: i, &id, &correlationId, paramsDepth) else { return nil }
                }
            }
        }

        /// Records a value's range when it is the top level's id or params' correlationId. `end` nil: a container,
        /// which neither may be. False: the line is not one this shape can stand for.
        private func noteValue(_ stack: [Frame], start: Int, end: Int?, _ id: inout Range<Int>?,
                               _ correlationId: inout Range<Int>?, _ paramsDepth: Int?) -> Bool {
            guard let frame = stack.last, frame.isObject else { return true }
            guard let key = frame.key else { return false }  // a value where a key belongs
            if stack.count == 1, key.elementsEqual("id".utf8) {
                guard id == nil, let end else { return false }
                id = start..<end
            } else if stack.count == paramsDepth, key.elementsEqual("correlationId".utf8) {
                guard correlationId == nil, let end else { return false }
                correlationId = start..<end
            }
            return true
        }

        /// Past a string that starts at `i`: the index after its closing quote, and whether it had no escape.
        private mutating func skipString() -> (end: Int, plain: Bool)? {
            var plain = true
            i += 1
            while i < line.count {
                switch line[i] {
                case UInt8(ascii: "\""):
                    i += 1
                    return (i, plain)
                case UInt8(ascii: "\\"):
                    plain = false
                    i += 2
                case 0..<0x20:
                    return nil
                default:
                    i += 1
                }
            }
            return nil
        }

        private mutating func skipSpace() {
            while i < line.count, line[i] == 0x20 || line[i] == 0x09 || line[i] == 0x0A || line[i] == 0x0D { i += 1 }
        }

        private static func ends(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[")
                || byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
        }
    }
}
