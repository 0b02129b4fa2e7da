/// Decodes `Decodable` types from a `JSONValue` tree: the JSON-RPC envelope is parsed once by `JSONReader`, and
/// params are decoded from the tree it built instead of from their bytes a second time.
///
/// Semantics and errors are JSONDecoder's (default strategies): absent and null both read as nil in
/// `decodeIfPresent`; the first of duplicate keys wins; `DecodingError` cases and messages are the same, except
/// that a number that does not fit the requested type is `dataCorrupted` at its own coding path (JSONDecoder
/// reports it at the top level as "not valid JSON"). A `JSONValue` member is handed over as it is (member order and
/// number literals kept); `.raw` values are parsed when met. Input is untrusted: nothing here traps on it.
public struct JSONValueDecoder: Sendable {
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        let decoder = try ValueDecoder(value: value, node: .root, userInfo: userInfo.mapValues { $0 as Any })
        return try decoder.decode(type, from: decoder.value, at: .root)
    }

    /// Parses `bytes` (strict JSON) first; a syntax error is `dataCorrupted` at the top level, as with JSONDecoder.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let value: JSONValue
        do {
            value = try JSONReader.parse(bytes)
        } catch {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: [], debugDescription: "The given data was not valid JSON (\(error)).", underlyingError: error))
        }
        return try decode(type, from: value)
    }
}

/// The `Decoder` for one value. Containers read primitives straight from the tree; only a nested `Decodable`
/// gets a decoder of its own.
final class ValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: JSONValue
    let node: CodingPathNode
    let userInfo: [CodingUserInfoKey: Any]

    var codingPath: [any CodingKey] { node.path }

    init(value: JSONValue, node: CodingPathNode, userInfo: [CodingUserInfoKey: Any]) throws {
        self.value = try Self.parsingRaw(value, node.path)
        self.node = node
        self.userInfo = userInfo
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        switch value {
        case .object(let object):
            return KeyedDecodingContainer(KeyedValueDecodingContainer<Key>(decoder: self, object: object))
        case .null:
            throw DecodingError.valueNotFound([String: Any].self, DecodingError.Context(
                codingPath: codingPath, debugDescription: "Cannot get keyed decoding container -- found null value instead"))
        default:
            throw Self.typeMismatch([String: Any].self, value, codingPath)
        }
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        switch value {
        case .array(let elements):
            return UnkeyedValueDecodingContainer(decoder: self, elements: elements)
        case .null:
            throw DecodingError.valueNotFound([Any].self, DecodingError.Context(
                codingPath: codingPath, debugDescription: "Cannot get unkeyed decoding container -- found null value instead"))
        default:
            throw Self.typeMismatch([Any].self, value, codingPath)
        }
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: Nested values

    /// `T` from `value`, found at `node`. JSONValue and the scalar types the stdlib's collections ask for
    /// generically (`[String]` decodes its elements as `T == String`) skip building a decoder.
    func decode<T: Decodable>(_ type: T.Type, from value: JSONValue, at node: @autoclosure () -> CodingPathNode) throws -> T {
        if T.self == JSONValue.self, let tree = try Self.parsingAllRaw(value, at: node()) as? T { return tree }
        if T.self == String.self, let string = try Self.string(value, node().path) as? T { return string }
        if T.self == Bool.self, let bool = try Self.bool(value, node().path) as? T { return bool }
        if T.self == Int64.self, let integer = try Self.integer(value, Int64.self, node().path) as? T { return integer }
        if T.self == Int.self, let integer = try Self.integer(value, Int.self, node().path) as? T { return integer }
        let decoder = try ValueDecoder(value: value, node: node(), userInfo: userInfo)
        return try T(from: decoder)
    }

    // MARK: Single value

    func decodeNil() -> Bool { value == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try Self.bool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try Self.string(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try Self.floatingPoint(value, type, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try Self.floatingPoint(value, type, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try Self.integer(value, type, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Self.integer(value, type, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Self.integer(value, type, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Self.integer(value, type, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Self.integer(value, type, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Self.integer(value, type, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Self.integer(value, type, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Self.integer(value, type, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Self.integer(value, type, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Self.integer(value, type, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decode(type, from: value, at: node) }
}

// MARK: - Scalars

extension ValueDecoder {
    // Paths are closures: building one costs more than reading a value, and only errors need them.
    typealias Path = () -> [any CodingKey]

    static func bool(_ value: JSONValue, _ path: @autoclosure Path) throws -> Bool {
        switch value {
        case .bool(let bool): return bool
        case .raw: return try bool(try parsingRaw(value, path()), path())
        default: throw typeMismatch(Bool.self, value, path())  // null too, as JSONDecoder does for Bool
        }
    }

    static func string(_ value: JSONValue, _ path: @autoclosure Path) throws -> String {
        switch value {
        case .string(let string): return string
        case .null: throw valueNotFound(String.self, path())
        case .raw: return try string(try parsingRaw(value, path()), path())
        default: throw typeMismatch(String.self, value, path())
        }
    }

    static func integer<T: FixedWidthInteger>(_ value: JSONValue, _ type: T.Type, _ path: @autoclosure Path) throws -> T {
        switch value {
        case .number(let literal):
            switch JSONNumberText.integer(literal, as: type) {
            case .value(let integer): return integer
            case .notAnInteger:
                throw dataCorrupted("\(JSONNumberText.excerpt(literal)) is not an integer (expected \(T.self))", path())
            case .outOfRange:
                throw dataCorrupted("\(JSONNumberText.excerpt(literal)) is out of range for \(T.self)", path())
            case .notANumber:
                throw dataCorrupted("\(JSONNumberText.excerpt(literal)) is not a JSON number", path())
            }
        case .null: throw valueNotFound(type, path())
        case .raw: return try integer(try parsingRaw(value, path()), type, path())
        default: throw typeMismatch(type, value, path())
        }
    }

    static func floatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(
        _ value: JSONValue, _ type: T.Type, _ path: @autoclosure Path
    ) throws -> T {
        switch value {
        case .number(let literal):
            guard let number = JSONNumberText.floatingPoint(literal, as: type) else {
                throw dataCorrupted("Number \(JSONNumberText.excerpt(literal)) is not representable as \(T.self)", path())
            }
            return number
        case .null: throw valueNotFound(type, path())
        case .raw: return try floatingPoint(try parsingRaw(value, path()), type, path())
        default: throw typeMismatch(type, value, path())
        }
    }

    // MARK: Raw values

    /// A `.raw` value read as what it holds; other values as they are.
    static func parsingRaw(_ value: JSONValue, _ path: @autoclosure Path) throws -> JSONValue {
        guard case .raw(let text) = value else { return value }
        do {
            return try JSONReader.parse(text, lenient: true)
        } catch {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: path(), debugDescription: "Verbatim JSON that does not parse (\(error)).", underlyingError: error))
        }
    }

    /// A whole tree with every `.raw` inside it parsed (JSONValue's own decoding would have seen them parsed).
    /// Trees without one, the usual case, are handed back untouched.
    static func parsingAllRaw(_ value: JSONValue, at node: CodingPathNode) throws -> JSONValue {
        switch value {
        case .null, .bool, .number, .string:
            return value
        case .raw:
            return try parsingRaw(value, node.path)
        case .array(var elements):
            for index in elements.indices where elements[index].containsRaw {
                elements[index] = try parsingAllRaw(elements[index], at: .index(index, node))
            }
            return .array(elements)
        case .object(var object):
            for index in object.members.indices where object.members[index].value.containsRaw {
                let member = object.members[index]
                object.members[index].value = try parsingAllRaw(
                    member.value, at: node.appending(ValueCodingKey(stringValue: member.key)))
            }
            return .object(object)
        }
    }

    // MARK: Errors, worded as JSONDecoder words them

    static func typeMismatch(_ type: Any.Type, _ value: JSONValue, _ path: [any CodingKey]) -> DecodingError {
        .typeMismatch(type, DecodingError.Context(
            codingPath: path, debugDescription: "Expected to decode \(type) but found \(value.kindDescription) instead."))
    }

    static func valueNotFound(_ type: Any.Type, _ path: [any CodingKey]) -> DecodingError {
        .valueNotFound(type, DecodingError.Context(
            codingPath: path, debugDescription: "Cannot get value of type \(type) -- found null value instead"))
    }

    static func dataCorrupted(_ message: String, _ path: [any CodingKey]) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: path, debugDescription: message))
    }
}

extension JSONValue {
    /// A `.raw` value as what it holds, so that `null` in it reads as null; one that does not parse stays raw, for
    /// the decoding that meets it to report where it was.
    var parsedIfRaw: JSONValue {
        guard case .raw(let text) = self, let parsed = try? JSONReader.parse(text, lenient: true) else { return self }
        return parsed
    }

    fileprivate var containsRaw: Bool {
        switch self {
        case .null, .bool, .number, .string: return false
        case .raw: return true
        case .array(let elements): return elements.contains { $0.containsRaw }
        case .object(let object): return object.members.contains { $0.value.containsRaw }
        }
    }
}
