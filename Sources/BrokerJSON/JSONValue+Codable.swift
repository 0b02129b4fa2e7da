/// JSONValue in Codable types (e.g. an account's id_token claims on the wire). Numbers go out as integers when
/// their literal is one, else as doubles (beyond Double's range, the largest finite one); raw values go out as
/// what they contain.
extension JSONValue: Codable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: Encoder) throws {
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .number(let literal):
            var single = encoder.singleValueContainer()
            if let integer = Int64(literal) { try single.encode(integer) } else { try single.encode(JSONNumberText.finiteDouble(literal)) }
        case .string(let value):
            var single = encoder.singleValueContainer()
            try single.encode(value)
        case .array(let items):
            var list = encoder.unkeyedContainer()
            for item in items { try list.encode(item) }
        case .object(let object):
            var keyed = encoder.container(keyedBy: Key.self)
            for member in object.members { try keyed.encode(member.value, forKey: Key(stringValue: member.key)) }
        case .raw(let text):
            try ((try? JSONReader.parse(text, lenient: true)) ?? .null).encode(to: encoder)
        }
    }

    public init(from decoder: Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            var object = JSONObject()
            for key in keyed.allKeys { object[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key) }
            self = .object(object)
        } else if var list = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            while !list.isAtEnd { items.append(try list.decode(JSONValue.self)) }
            self = .array(items)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() { self = .null }
            else if let value = try? single.decode(Bool.self) { self = .bool(value) }
            else if let value = try? single.decode(Int64.self) { self = .number(String(value)) }
            else if let value = try? single.decode(Double.self) { self = .number(String(value)) }
            else { self = .string(try single.decode(String.self)) }
        }
    }
}
