// Pieces shared by JSONValueDecoder and JSONValueEncoder: coding paths, keys, and number conversions.

/// A coding path kept as a chain towards the root: descending into a value costs one small node, and the array
/// the Codable API wants is only built when someone asks for it (an error, or a type that reads `codingPath`).
indirect enum CodingPathNode {
    case root
    case key(any CodingKey, CodingPathNode)
    case index(Int, CodingPathNode)

    var path: [any CodingKey] {
        var keys: [any CodingKey] = []
        var node = self
        while true {
            switch node {
            case .root: return keys.reversed()
            case .key(let key, let parent): keys.append(key); node = parent
            case .index(let index, let parent): keys.append(ValueCodingKey(index: index)); node = parent
            }
        }
    }

    func appending(_ key: some CodingKey) -> CodingPathNode {
        .key(key, self)
    }

    func path(appending key: some CodingKey) -> [any CodingKey] {
        path + [key]
    }
}

/// The key of an array element's path, of `super`, and of a JSONValue member.
struct ValueCodingKey: CodingKey, Sendable {
    var stringValue: String
    var intValue: Int?

    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) { self.init(index: intValue) }
    init(index: Int) {
        self.stringValue = "Index \(index)"
        self.intValue = index
    }
    static let `super` = ValueCodingKey(stringValue: "super")
}

/// Number literals of a JSONValue as Swift numbers, exactly: an integer type takes a literal only when its value
/// is an integer that fits (`1e3` and `2.0` do, `1.5` and `1e400` do not), never by way of a rounded Double.
enum JSONNumberText {
    enum IntegerReading<T> {
        case value(T)
        case notAnInteger
        case outOfRange
        case notANumber
    }

    static func integer<T: FixedWidthInteger>(_ literal: String, as type: T.Type) -> IntegerReading<T> {
        if let value = T(literal) { return .value(value) }
        guard let parts = Parts(literal) else { return .notANumber }
        // The digits without leading and trailing zeros, and the power of ten they are scaled by.
        let all = parts.integerDigits + parts.fractionDigits
        guard let first = all.firstIndex(where: { $0 != UInt8(ascii: "0") }),
              let last = all.lastIndex(where: { $0 != UInt8(ascii: "0") }) else { return .value(0) }
        let digits = all[first...last]
        let exponent = parts.exponent - parts.fractionDigits.count + (all.count - 1 - last)
        if exponent < 0 { return .notAnInteger }
        // 40 digits exceed every fixed-width integer up to 128 bits; the check keeps `1e999999` from allocating.
        guard digits.count + exponent <= 40 else { return .outOfRange }
        var text: [UInt8] = parts.negative ? [UInt8(ascii: "-")] : []
        text += digits
        text += repeatElement(UInt8(ascii: "0"), count: exponent)
        guard let value = T(String(decoding: text, as: UTF8.self)) else { return .outOfRange }
        return .value(value)
    }

    /// nil when the literal is not a JSON number or its value is beyond the type (infinite, or a non-zero value
    /// that would round to zero), as JSONDecoder refuses them.
    static func floatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(_ literal: String, as type: T.Type) -> T? {
        guard let parts = Parts(literal), let value = T(literal), value.isFinite else { return nil }
        if value == 0, (parts.integerDigits + parts.fractionDigits).contains(where: { $0 != UInt8(ascii: "0") }) { return nil }
        return value
    }

    /// A literal as a Double that JSON can carry: beyond Double's range (`1e400`, from any IdP's id_token) it is
    /// the largest finite one, so that a value the reader took can always be encoded again. A zero with a sign
    /// (`-0.0`, `-0E12`, `-1e-400`) is 0: written `-0`, it would be read back as the integer 0 and written `0`, and
    /// a value must encode to the same bytes each time (found by the json-reader fuzz target).
    static func finiteDouble(_ literal: String) -> Double {
        let value = Double(literal) ?? 0
        if value == 0 { return 0 }
        guard value.isInfinite else { return value }
        return value < 0 ? -.greatestFiniteMagnitude : .greatestFiniteMagnitude
    }

    /// How JSONEncoder writes a Double or Float: its description, without a trailing `.0`.
    static func text<T: BinaryFloatingPoint & CustomStringConvertible>(_ value: T) -> String? {
        guard value.isFinite else { return nil }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }

    /// A literal cut to a length fit for an error message (a number can be a megabyte of digits).
    static func excerpt(_ literal: String) -> String {
        literal.utf8.count <= 40 ? literal : String(literal.prefix(40)) + "…"
    }

    /// A JSON number taken apart (RFC 8259 §6 grammar); anything else (`+1`, `0x10`, `nan`, `.5`) is refused.
    struct Parts {
        var negative = false
        var integerDigits: [UInt8] = []
        var fractionDigits: [UInt8] = []
        var exponent = 0

        init?(_ literal: String) {
            var bytes = literal.utf8.makeIterator()
            var next = bytes.next()
            if next == UInt8(ascii: "-") { negative = true; next = bytes.next() }
            while let byte = next, Self.isDigit(byte) { integerDigits.append(byte); next = bytes.next() }
            guard !integerDigits.isEmpty, integerDigits.count == 1 || integerDigits[0] != UInt8(ascii: "0") else { return nil }
            if next == UInt8(ascii: ".") {
                next = bytes.next()
                while let byte = next, Self.isDigit(byte) { fractionDigits.append(byte); next = bytes.next() }
                guard !fractionDigits.isEmpty else { return nil }
            }
            if next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
                next = bytes.next()
                var negativeExponent = false
                if next == UInt8(ascii: "-") || next == UInt8(ascii: "+") {
                    negativeExponent = next == UInt8(ascii: "-")
                    next = bytes.next()
                }
                var sawDigit = false
                while let byte = next, Self.isDigit(byte) {
                    // Saturates: past a million the value is out of every range (or zero) anyway.
                    exponent = min(exponent * 10 + Int(byte - UInt8(ascii: "0")), 1_000_000)
                    sawDigit = true
                    next = bytes.next()
                }
                guard sawDigit else { return nil }
                if negativeExponent { exponent = -exponent }
            }
            guard next == nil else { return nil }
        }

        private static func isDigit(_ byte: UInt8) -> Bool {
            byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
        }
    }
}

extension JSONValue {
    /// What JSONDecoder calls a value's kind in its messages ("Expected to decode String but found number instead.").
    var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "bool"
        case .number: return "number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "a dictionary"
        case .raw: return "unparsed JSON"
        }
    }
}
