import BrokerJSON

/// The JSON shape of a value on the wire, as recorded from a Swift type or read from a JSON Schema, so that the
/// two can be compared without either side knowing the other's vocabulary.
indirect enum WireShape: Equatable, CustomStringConvertible {
    case string, integer, number, boolean
    /// Any JSON value at all (JSONValue); never produced for a concrete Swift type.
    case any
    case array(WireShape)
    case object(WireObject)
    /// An object used as a dictionary: any member names, all values of one shape.
    case map(WireShape)
    /// Alternatives, e.g. AccountReference's string-or-object.
    case oneOf([WireShape])

    var kind: String {
        switch self {
        case .string: return "string"
        case .integer: return "integer"
        case .number: return "number"
        case .boolean: return "boolean"
        case .any: return "any JSON"
        case .array: return "array"
        case .object: return "object"
        case .map: return "map"
        case .oneOf(let alternatives): return alternatives.map(\.kind).joined(separator: " or ")
        }
    }

    var description: String { kind }

    var alternatives: [WireShape] {
        if case .oneOf(let alternatives) = self { return alternatives }
        return [self]
    }
}

struct WireObject: Equatable {
    /// The Swift type (or schema) the object came from, for failure messages.
    var name: String
    var fields: [WireField]

    subscript(name: String) -> WireField? { fields.first { $0.name == name } }
}

struct WireField: Equatable {
    var name: String
    /// Swift: read with `decode` (absence is an error). Schema: listed in `required`.
    var required: Bool
    /// Swift: `decodeIfPresent`/`decodeNil` (null reads as absent). Schema: the type admits null.
    var nullable: Bool
    /// Swift only: the encoder writes the member as `null` rather than leaving it out (found by `WireSamples`).
    var writtenAsNull = false
    var shape: WireShape
}

struct RecordingFailure: Error, CustomStringConvertible {
    var description: String
}

/// Records the wire shape of a `Decodable` type by decoding it from a `Decoder` that has no data: every key the
/// type asks for is noted with how it was asked (`decode` → required, `decodeIfPresent` → optional) and what it
/// was asked as, and a harmless value is handed back so decoding can go on.
///
/// A type may look at the decoder in several ways (AccountReference first tries a bare string, then an object), so
/// each type is decoded three times: once allowing only a single value, once only a keyed container, once only an
/// unkeyed one. Every pass that succeeds is one alternative of the type's shape. Optional members are handed a
/// value, not nil, so that checks like "homeAccountId or username" pass and the object alternative is seen.
enum SchemaRecorder {
    static func shape(of type: any Decodable.Type) throws -> WireShape {
        try Session().record(type, codingPath: []).shape
    }

    struct Recorded {
        var shape: WireShape
        var acceptsNull: Bool
        var value: Any
    }

    final class Session {
        private var depth = 0

        func record<T: Decodable>(_ type: T.Type, codingPath: [CodingKey]) throws -> Recorded {
            // JSONValue takes whatever it is given, and asking its decoder for keys would recurse without end:
            // it is "any JSON" by definition.
            if type == JSONValue.self { return Recorded(shape: .any, acceptsNull: true, value: JSONValue.null) }
            guard depth < 32 else {
                throw RecordingFailure(description: "\(T.self) at \(Self.path(codingPath)) nests too deep (a recursive type?)")
            }
            depth += 1
            defer { depth -= 1 }

            var shapes: [WireShape] = []
            var acceptsNull = false
            var firstValue: T?
            var failures: [String] = []
            for kind in Node.Kind.allCases {
                let node = Node(allowed: kind)
                do {
                    let value = try T(from: RecordingDecoder(session: self, node: node, codingPath: codingPath))
                    let shape = node.shape(name: String(describing: T.self))
                    if !shapes.contains(shape) { shapes.append(shape) }
                    acceptsNull = acceptsNull || node.acceptsNull
                    firstValue = firstValue ?? value
                } catch {
                    failures.append("as \(kind): \(error)")
                }
            }
            guard let firstValue else {
                throw RecordingFailure(description: "cannot record \(T.self) at \(Self.path(codingPath)): "
                                       + failures.joined(separator: "; "))
            }
            return Recorded(shape: shapes.count == 1 ? shapes[0] : .oneOf(shapes), acceptsNull: acceptsNull, value: firstValue)
        }

        static func path(_ codingPath: [CodingKey]) -> String {
            codingPath.isEmpty ? "top level" : codingPath.map(\.stringValue).joined(separator: ".")
        }
    }

    /// What one value turned out to be while its type decoded itself.
    final class Node {
        enum Kind: CaseIterable { case single, keyed, unkeyed }

        struct Field {
            var name: String
            var required: Bool
            var nullable: Bool
            var node: Node
        }

        enum Content {
            case untouched
            case value(WireShape)
            case object([Field])
            case map(Node)
            case array(Node)
        }

        let allowed: Kind
        var content = Content.untouched
        var acceptsNull = false
        /// Keys asked about with `contains` or `decodeNil` before being read: reading them is conditional.
        var probedKeys: Set<String> = []

        init(allowed: Kind) { self.allowed = allowed }

        static func value(_ shape: WireShape, acceptsNull: Bool = false) -> Node {
            let node = Node(allowed: .single)
            node.content = .value(shape)
            node.acceptsNull = acceptsNull
            return node
        }

        func addField(_ name: String, required: Bool, nullable: Bool, node: Node) {
            let conditional = probedKeys.contains(name)
            let field = Field(name: name, required: required && !conditional, nullable: nullable || node.acceptsNull, node: node)
            switch content {
            case .object(var fields):
                if let index = fields.firstIndex(where: { $0.name == name }) {
                    fields[index].required = fields[index].required || field.required
                } else {
                    fields.append(field)
                }
                content = .object(fields)
            default:
                content = .object([field])
            }
        }

        func shape(name: String) -> WireShape {
            switch content {
            case .untouched: return .any
            case .value(let shape): return shape
            case .map(let values): return .map(values.shape(name: name))
            case .array(let element): return .array(element.shape(name: name))
            case .object(let fields):
                return .object(WireObject(name: name, fields: fields.map {
                    WireField(name: $0.name, required: $0.required, nullable: $0.nullable, shape: $0.node.shape(name: "\(name).\($0.name)"))
                }))
            }
        }
    }
}

/// A member name no real type uses, handed out by `allKeys` so that a dictionary reveals its value type.
private let mapWildcard = "\u{0}*"

private struct RecordingDecoder: Decoder {
    let session: SchemaRecorder.Session
    let node: SchemaRecorder.Node
    let codingPath: [CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    private func refuse(_ kind: SchemaRecorder.Node.Kind) -> DecodingError {
        .typeMismatch(Any.self, .init(codingPath: codingPath, debugDescription: "this pass records the \(node.allowed) form, not \(kind)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard node.allowed == .keyed else { throw refuse(.keyed) }
        if case .untouched = node.content { node.content = .object([]) }
        return KeyedDecodingContainer(KeyedRecorder<Key>(session: session, node: node, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> UnkeyedDecodingContainer {
        guard node.allowed == .unkeyed else { throw refuse(.unkeyed) }
        return UnkeyedRecorder(session: session, node: node, codingPath: codingPath)
    }

    func singleValueContainer() throws -> SingleValueDecodingContainer {
        guard node.allowed == .single else { throw refuse(.single) }
        return SingleRecorder(session: session, node: node, codingPath: codingPath)
    }
}

/// The harmless value handed back for each primitive: decoding must go on, whatever the type does with it.
private protocol Placeholder { static var placeholder: Self { get } }
extension String: Placeholder { static var placeholder: String { "recorded" } }
extension Bool: Placeholder { static var placeholder: Bool { false } }

private func primitiveShape(_ type: Any.Type) -> WireShape? {
    switch type {
    case is String.Type: return .string
    case is Bool.Type: return .boolean
    case is Double.Type, is Float.Type: return .number
    case is Int.Type, is Int8.Type, is Int16.Type, is Int32.Type, is Int64.Type,
         is UInt.Type, is UInt8.Type, is UInt16.Type, is UInt32.Type, is UInt64.Type: return .integer
    default: return nil
    }
}

private func primitivePlaceholder<T>(_ type: T.Type) -> T {
    if let placeholder = (T.self as? Placeholder.Type)?.placeholder as? T { return placeholder }
    if let integer = (T.self as? any BinaryInteger.Type)?.init(0) as? T { return integer }
    if let real = (T.self as? any BinaryFloatingPoint.Type)?.init(0) as? T { return real }
    fatalError("no placeholder for \(T.self)")
}

private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) { self.stringValue = "[\(intValue)]"; self.intValue = intValue }
}

private struct KeyedRecorder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let session: SchemaRecorder.Session
    let node: SchemaRecorder.Node
    let codingPath: [CodingKey]

    /// One wildcard key: a type that enumerates its keys is a dictionary, and the wildcard's value is its value type.
    var allKeys: [Key] {
        Key(stringValue: mapWildcard).map { [$0] } ?? []
    }

    func contains(_ key: Key) -> Bool {
        node.probedKeys.insert(key.stringValue)
        return true
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        node.probedKeys.insert(key.stringValue)
        return false
    }

    private func note(_ key: Key, required: Bool, _ child: SchemaRecorder.Node) {
        if key.stringValue == mapWildcard {
            node.content = .map(child)
        } else {
            node.addField(key.stringValue, required: required, nullable: !required, node: child)
        }
    }

    private func read<T: Decodable>(_ type: T.Type, _ key: Key, required: Bool) throws -> T {
        if let primitive = primitiveShape(T.self) {
            note(key, required: required, .value(primitive))
            return primitivePlaceholder(T.self)
        }
        let recorded = try session.record(T.self, codingPath: codingPath + [key])
        note(key, required: required, .value(recorded.shape, acceptsNull: recorded.acceptsNull))
        return recorded.value as! T
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try read(T.self, key, required: true) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try read(T.self, key, required: false) }

    // The concrete overloads are requirements of their own: without them the library's defaults would answer
    // `decodeIfPresent` through `contains` + `decode`, and optional members would look required.
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try read(type, key, required: true) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try read(type, key, required: true) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try read(type, key, required: true) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try read(type, key, required: true) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try read(type, key, required: true) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try read(type, key, required: true) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try read(type, key, required: true) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try read(type, key, required: true) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try read(type, key, required: true) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try read(type, key, required: true) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try read(type, key, required: true) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try read(type, key, required: true) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try read(type, key, required: true) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try read(type, key, required: true) }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try read(type, key, required: false) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try read(type, key, required: false) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let child = SchemaRecorder.Node(allowed: .keyed)
        child.content = .object([])
        note(key, required: true, child)
        return KeyedDecodingContainer(KeyedRecorder<NestedKey>(session: session, node: child, codingPath: codingPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer {
        let child = SchemaRecorder.Node(allowed: .unkeyed)
        note(key, required: true, child)
        return UnkeyedRecorder(session: session, node: child, codingPath: codingPath + [key])
    }

    // A super decoder could be read in any form; nothing in the protocol uses one, so it fails loudly instead.
    func superDecoder() throws -> Decoder { throw RecordingFailure(description: "superDecoder is not supported") }
    func superDecoder(forKey key: Key) throws -> Decoder { throw RecordingFailure(description: "superDecoder is not supported") }
}

/// Shows one element (`isAtEnd` turns true after it), which is all an array's shape needs.
private struct UnkeyedRecorder: UnkeyedDecodingContainer {
    let session: SchemaRecorder.Session
    let node: SchemaRecorder.Node
    let codingPath: [CodingKey]
    var count: Int? { nil }
    var currentIndex = 0
    var isAtEnd: Bool { currentIndex > 0 }

    init(session: SchemaRecorder.Session, node: SchemaRecorder.Node, codingPath: [CodingKey]) {
        self.session = session
        self.node = node
        self.codingPath = codingPath
        if case .untouched = node.content { node.content = .array(.value(.any)) }
    }

    mutating func decodeNil() throws -> Bool { false }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(T.self) }
    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) }

    private mutating func next<T: Decodable>(_ type: T.Type) throws -> T {
        defer { currentIndex += 1 }
        if let primitive = primitiveShape(T.self) {
            if currentIndex == 0 { node.content = .array(.value(primitive)) }
            return primitivePlaceholder(T.self)
        }
        let recorded = try session.record(T.self, codingPath: codingPath + [AnyKey(intValue: currentIndex)])
        if currentIndex == 0 { node.content = .array(.value(recorded.shape, acceptsNull: recorded.acceptsNull)) }
        return recorded.value as! T
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        defer { currentIndex += 1 }
        let child = SchemaRecorder.Node(allowed: .keyed)
        child.content = .object([])
        if currentIndex == 0 { node.content = .array(child) }
        return KeyedDecodingContainer(KeyedRecorder<NestedKey>(session: session, node: child,
                                                               codingPath: codingPath + [AnyKey(intValue: currentIndex)]))
    }

    mutating func nestedUnkeyedContainer() throws -> UnkeyedDecodingContainer {
        defer { currentIndex += 1 }
        let child = SchemaRecorder.Node(allowed: .unkeyed)
        if currentIndex == 0 { node.content = .array(child) }
        return UnkeyedRecorder(session: session, node: child, codingPath: codingPath + [AnyKey(intValue: currentIndex)])
    }

    mutating func superDecoder() throws -> Decoder { throw RecordingFailure(description: "superDecoder is not supported") }
}

private struct SingleRecorder: SingleValueDecodingContainer {
    let session: SchemaRecorder.Session
    let node: SchemaRecorder.Node
    let codingPath: [CodingKey]

    /// `Optional` asks this before reading its wrapped value.
    func decodeNil() -> Bool {
        node.acceptsNull = true
        return false
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try value(T.self) }
    func decode(_ type: Bool.Type) throws -> Bool { try value(type) }
    func decode(_ type: String.Type) throws -> String { try value(type) }
    func decode(_ type: Double.Type) throws -> Double { try value(type) }
    func decode(_ type: Float.Type) throws -> Float { try value(type) }
    func decode(_ type: Int.Type) throws -> Int { try value(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try value(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try value(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try value(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try value(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try value(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try value(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try value(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try value(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try value(type) }

    private func value<T: Decodable>(_ type: T.Type) throws -> T {
        if let primitive = primitiveShape(T.self) {
            node.content = .value(primitive)
            return primitivePlaceholder(T.self)
        }
        let recorded = try session.record(T.self, codingPath: codingPath)
        node.content = .value(recorded.shape)
        node.acceptsNull = node.acceptsNull || recorded.acceptsNull
        return recorded.value as! T
    }
}
