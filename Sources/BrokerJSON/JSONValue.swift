/// A JSON value that remembers what it was read as.
///
/// Numbers keep their literal text (a cache written by another SDK must come back with the same digits), and
/// `raw` holds a value that was validated but deliberately not interpreted, so it can be written back
/// byte-for-byte. Objects keep member order.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
    /// A complete, valid JSON text kept exactly as it was read.
    case raw(String)

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// Integers written as numbers or as strings ("1700000000", "1700000000.25", 1.7e9) read the same.
    public var integerValue: Int64? {
        switch self {
        case .number(let text), .string(let text):
            if let plain = Self.plainDigits(text) { return plain }
            let trimmed = text.trimmingSpaces
            if let exact = Int64(trimmed) { return exact }
            if let real = Double(trimmed), real.isFinite, abs(real) < 9.2e18 { return Int64(real.rounded(.down)) }
            return nil
        default:
            return nil
        }
    }

    /// The value of 1 to 18 ASCII digits and nothing else (a timestamp as every SDK writes it), nil for any other
    /// text: what `Int64(_:)` gives for those, read without its generic parse (a load reads three per token).
    private static func plainDigits(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { bytes -> Int64? in
            guard (1...18).contains(bytes.count) else { return nil }
            var value: Int64 = 0
            for byte in bytes {
                let digit = byte &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value &* 10 &+ Int64(digit)
            }
            return value
        }
    }

    public static func int(_ value: Int64) -> JSONValue { .number(String(value)) }
    public static func int(_ value: Int) -> JSONValue { .number(String(value)) }
}

/// An ordered JSON object. Lookups are linear: objects here are small (cache entities have ~12 fields);
/// large maps (the cache sections) are indexed by their owners.
public struct JSONObject: Sendable, Hashable {
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    public var members: [Member]

    public init(_ members: [Member] = []) {
        self.members = members
    }

    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        self.members = pairs.map { Member(key: $0.key, value: $0.value) }
    }

    public subscript(key: String) -> JSONValue? {
        get { members.first(where: { $0.key == key })?.value }
        set {
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(Member(key: key, value: newValue))
            }
        }
    }

    public var keys: [String] { members.map(\.key) }
    public var isEmpty: Bool { members.isEmpty }
}

extension String {
    var trimmingSpaces: Substring {
        var s = Substring(self)
        while let first = s.first, first == " " || first == "\t" { s = s.dropFirst() }
        while let last = s.last, last == " " || last == "\t" { s = s.dropLast() }
        return s
    }
}
