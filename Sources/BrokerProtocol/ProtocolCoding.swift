import BrokerJSON

/// The wire's one JSON stack: JSONReader parses, JSONValueDecoder/JSONValueEncoder map to and from the protocol
/// types, JSONWriter writes (compact, keys sorted, as JSONEncoder with `.sortedKeys` wrote them).
public enum ProtocolCoding {
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try JSONValueEncoder().encodeToBytes(value)
    }

    /// From params or a result as the envelope's reader parsed them.
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try JSONValueDecoder().decode(type, from: value)
    }

    /// From JSON text (a notification's params, a result as the client received it).
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONValueDecoder().decode(type, from: bytes)
    }

    /// A readable account of why params did not decode: which field, and what was wrong with it.
    public static func describe(_ error: Error) -> String {
        guard let decoding = error as? DecodingError else { return "\(error)" }
        func path(_ codingPath: [CodingKey], _ last: CodingKey? = nil) -> String {
            let keys = (codingPath + (last.map { [$0] } ?? [])).map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "params" : keys.joined(separator: ".")
        }
        switch decoding {
        case .keyNotFound(let key, let context):
            return "missing parameter '\(path(context.codingPath, key))'"
        case .typeMismatch(let type, let context):
            return "parameter '\(path(context.codingPath))' must be \(describe(type))"
        case .valueNotFound(let type, let context):
            return "parameter '\(path(context.codingPath))' must be \(describe(type)), not null"
        case .dataCorrupted(let context):
            return "parameter '\(path(context.codingPath))': \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type: return "an integer"
        case is [String].Type: return "an array of strings"
        default: return "of type \(type)"
        }
    }
}
