/// Encodes `Encodable` types to a `JSONValue` tree, to be written with `JSONWriter`.
///
/// The result is what JSONEncoder with `[.sortedKeys, .withoutEscapingSlashes]` and default strategies writes:
/// object keys sorted by their UTF-8 bytes (as swift-foundation sorts them on Linux), the last of duplicate keys
/// kept, Doubles as their shortest description without a trailing `.0`, NaN and infinities refused with
/// `EncodingError.invalidValue`, a value that encodes nothing as `{}` (at the top level, an error). A `JSONValue`
/// is written without a detour through its Codable conformance, with the same result that detour gives.
public struct JSONValueEncoder: Sendable {
    /// Off: members in the order they were encoded (JSONEncoder's order would be the dictionary's, i.e. random).
    public var sortedKeys: Bool
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    public init(sortedKeys: Bool = true) {
        self.sortedKeys = sortedKeys
    }

    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let encoder = ValueEncoder(node: .root, options: .init(sortedKeys: sortedKeys, userInfo: userInfo.mapValues { $0 }))
        guard let result = try encoder.encodeNested(value) else {
            throw EncodingError.invalidValue(value, EncodingError.Context(
                codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        return result
    }

    /// Compact JSON text as JSONEncoder writes it (`JSONWriter.wireBytes`: no raw newline, `/` not escaped).
    public func encodeToBytes<T: Encodable>(_ value: T) throws -> [UInt8] {
        JSONWriter.wireBytes(try encode(value))
    }
}

/// The `Encoder` for one value. What it holds is finished into a JSONValue when the value's `encode(to:)`
/// returns; containers handed out by nested-container calls stay writable until their parent is finished,
/// hence the reference-typed boxes.
final class ValueEncoder: Encoder, SingleValueEncodingContainer {
    struct Options {
        var sortedKeys: Bool
        var userInfo: [CodingUserInfoKey: Any]
    }

    enum Storage {
        case empty
        case value(JSONValue)
        case object(ObjectBox)
        case array(ArrayBox)
    }

    let node: CodingPathNode
    let options: Options
    var storage = Storage.empty

    init(node: CodingPathNode, options: Options) {
        self.node = node
        self.options = options
    }

    var codingPath: [any CodingKey] { node.path }
    var userInfo: [CodingUserInfoKey: Any] { options.userInfo }

    // Asking twice for the same kind of container gives the same one (as with JSONEncoder); asking for another
    // kind replaces what was there, where JSONEncoder would trap.
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: ObjectBox
        switch storage {
        case .object(let existing): box = existing
        case .value(.object(let object)): box = ObjectBox(object.members)
        default: box = ObjectBox()
        }
        storage = .object(box)
        return KeyedEncodingContainer(KeyedValueEncodingContainer<Key>(encoder: self, box: box))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: ArrayBox
        switch storage {
        case .array(let existing): box = existing
        case .value(.array(let elements)): box = ArrayBox(elements)
        default: box = ArrayBox()
        }
        storage = .array(box)
        return UnkeyedValueEncodingContainer(encoder: self, box: box)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    /// What was encoded, nil when nothing was.
    func finish() -> JSONValue? {
        switch storage {
        case .empty: return nil
        case .value(let value): return value
        case .object(let box): return box.finish(sortedKeys: options.sortedKeys)
        case .array(let box): return box.finish(sortedKeys: options.sortedKeys)
        }
    }

    // MARK: Nested values

    /// `value` as a JSONValue, nil when it encoded nothing.
    func encodeNested<T: Encodable>(_ value: T) throws -> JSONValue? {
        if let direct = try Self.direct(value, sortedKeys: options.sortedKeys, at: node) { return direct }
        let encoder = ValueEncoder(node: node, options: options)
        try value.encode(to: encoder)
        return encoder.finish()
    }

    /// `value` at `node` below this encoder; `{}` when it encoded nothing, as JSONEncoder writes it.
    func encode<T: Encodable>(_ value: T, at node: @autoclosure () -> CodingPathNode) throws -> JSONValue {
        if let direct = try Self.direct(value, sortedKeys: options.sortedKeys, at: node()) { return direct }
        let encoder = ValueEncoder(node: node(), options: options)
        try value.encode(to: encoder)
        return encoder.finish() ?? .object(JSONObject())
    }

    /// JSONValue and the scalars the stdlib's collections encode generically (`[String]` encodes `T == String`),
    /// without building an encoder for them.
    private static func direct<T: Encodable>(_ value: T, sortedKeys: Bool, at node: @autoclosure () -> CodingPathNode) throws -> JSONValue? {
        if T.self == String.self, let string = value as? String { return .string(string) }
        if T.self == JSONValue.self, let json = value as? JSONValue { return try canonical(json, sortedKeys: sortedKeys, at: node) }
        if T.self == Bool.self, let bool = value as? Bool { return .bool(bool) }
        if T.self == Int64.self, let integer = value as? Int64 { return .number(String(integer)) }
        if T.self == Int.self, let integer = value as? Int { return .number(String(integer)) }
        return nil
    }

    /// A JSONValue as JSONValue's Codable conformance would put it through this encoder: numbers as Int64 when
    /// their literal is one, else as Double (0 when not a number at all, the largest finite one beyond Double's
    /// range); raw values parsed; objects through a keyed container (sorted, last duplicate wins).
    static func canonical(_ value: JSONValue, sortedKeys: Bool, at node: () -> CodingPathNode) throws -> JSONValue {
        switch value {
        case .null, .bool, .string:
            return value
        case .number(let literal):
            if let integer = Int64(literal) {
                let text = String(integer)
                return text == literal ? value : .number(text)
            }
            return try number(JSONNumberText.finiteDouble(literal), node().path)
        case .raw(let text):
            return try canonical((try? JSONReader.parse(text, lenient: true)) ?? .null, sortedKeys: sortedKeys, at: node)
        case .array(let elements):
            var result: [JSONValue] = []
            result.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                result.append(try canonical(element, sortedKeys: sortedKeys, at: { .index(index, node()) }))
            }
            return .array(result)
        case .object(let object):
            var members: [JSONObject.Member] = []
            members.reserveCapacity(object.members.count)
            for member in object.members {
                let child = try canonical(member.value, sortedKeys: sortedKeys,
                                          at: { node().appending(ValueCodingKey(stringValue: member.key)) })
                members.append(JSONObject.Member(key: member.key, value: child))
            }
            ObjectBox.order(&members, sortedKeys: sortedKeys)
            return .object(JSONObject(members))
        }
    }

    static func number<T: BinaryFloatingPoint & CustomStringConvertible>(_ value: T, _ path: @autoclosure () -> [any CodingKey]) throws -> JSONValue {
        guard let text = JSONNumberText.text(value) else {
            throw EncodingError.invalidValue(value, EncodingError.Context(
                codingPath: path(), debugDescription: "Unable to encode \(T.self).\(value) directly in JSON."))
        }
        return .number(text)
    }

    // MARK: Single value

    private func set(_ value: JSONValue) { storage = .value(value) }

    func encodeNil() { set(.null) }
    func encode(_ value: Bool) { set(.bool(value)) }
    func encode(_ value: String) { set(.string(value)) }
    func encode(_ value: Double) throws { set(try Self.number(value, codingPath)) }
    func encode(_ value: Float) throws { set(try Self.number(value, codingPath)) }
    func encode(_ value: Int) { set(.number(String(value))) }
    func encode(_ value: Int8) { set(.number(String(value))) }
    func encode(_ value: Int16) { set(.number(String(value))) }
    func encode(_ value: Int32) { set(.number(String(value))) }
    func encode(_ value: Int64) { set(.number(String(value))) }
    func encode(_ value: UInt) { set(.number(String(value))) }
    func encode(_ value: UInt8) { set(.number(String(value))) }
    func encode(_ value: UInt16) { set(.number(String(value))) }
    func encode(_ value: UInt32) { set(.number(String(value))) }
    func encode(_ value: UInt64) { set(.number(String(value))) }

    // Into this very encoder, as JSONEncoder does: a wrapper type's single value becomes the value itself.
    func encode<T: Encodable>(_ value: T) throws {
        if let json = try encodeNested(value) { set(json) } else { set(.object(JSONObject())) }
    }
}

/// An object under construction. Finished members are kept as they will be written; nested containers and super
/// encoders, which may still be written to, wait in `pending` until `finish`.
final class ObjectBox {
    enum Slot {
        case object(ObjectBox)
        case array(ArrayBox)
        /// A super encoder, which may still be written to after it was handed out.
        case encoder(ValueEncoder)
    }

    var members: [JSONObject.Member]
    private var pending: [(index: Int, slot: Slot)] = []

    init(_ members: [JSONObject.Member] = []) {
        self.members = members
        // One allocation for the usual object instead of a growth step at 1, 2, 4 and 8 members.
        self.members.reserveCapacity(16)
    }

    func append(_ key: String, _ value: JSONValue) {
        members.append(JSONObject.Member(key: key, value: value))
    }

    func append(_ key: String, _ slot: Slot) {
        pending.append((members.count, slot))
        members.append(JSONObject.Member(key: key, value: .null))
    }

    func finish(sortedKeys: Bool) -> JSONValue {
        for (index, slot) in pending { members[index].value = slot.finish(sortedKeys: sortedKeys) }
        pending = []
        var finished = members
        members = []  // leaves `finished` the only reference, so that it is sorted in place
        Self.order(&finished, sortedKeys: sortedKeys)
        return .object(JSONObject(finished))
    }

    /// Members sorted by the UTF-8 bytes of their keys (stable, so equal keys keep their order), with only the
    /// last of equal keys kept: JSONEncoder's object is a dictionary, where a later write replaces an earlier one.
    static func order(_ members: inout [JSONObject.Member], sortedKeys: Bool) {
        guard members.count > 1 else { return }
        guard sortedKeys else { members = lastOfEqualKeys(members); return }
        // Sorted as (first eight bytes, position) pairs: no strings are touched for keys that differ early, and the
        // position keeps equal keys in their order.
        var keys = members.indices.map { (prefix: keyPrefix(members[$0].key), index: $0) }
        keys.sort { lhs, rhs in
            if lhs.prefix != rhs.prefix { return lhs.prefix < rhs.prefix }
            let left = members[lhs.index].key, right = members[rhs.index].key
            if left == right { return lhs.index < rhs.index }
            return precedes(left, right)
        }
        if keys.indices.contains(where: { keys[$0].index != $0 }) { members = keys.map { members[$0.index] } }
        guard (1..<members.count).contains(where: { members[$0 - 1].key == members[$0].key }) else { return }
        var result: [JSONObject.Member] = []
        for member in members {
            if let last = result.last, last.key == member.key { result[result.count - 1] = member } else { result.append(member) }
        }
        members = result
    }

    /// A key's first eight UTF-8 bytes as a big-endian number, zero-padded: ordering these orders the keys, up to
    /// keys that share them.
    static func keyPrefix(_ key: String) -> UInt64 {
        var key = key
        return key.withUTF8 { bytes in
            var prefix: UInt64 = 0
            for index in 0..<8 { prefix = prefix << 8 | (index < bytes.count ? UInt64(bytes[index]) : 0) }
            return prefix
        }
    }

    /// UTF-8 byte order, compared on the strings' contiguous storage (the generic UTF8View comparison was the
    /// better part of an answer's sorting time).
    static func precedes(_ lhs: String, _ rhs: String) -> Bool {
        var lhs = lhs, rhs = rhs
        return lhs.withUTF8 { left in
            rhs.withUTF8 { right in
                for index in 0..<min(left.count, right.count) where left[index] != right[index] {
                    return left[index] < right[index]
                }
                return left.count < right.count
            }
        }
    }

    /// Unsorted: each key where it first appeared, with its last value.
    private static func lastOfEqualKeys(_ members: [JSONObject.Member]) -> [JSONObject.Member] {
        var positions: [String: Int] = [:]
        var result: [JSONObject.Member] = []
        for member in members {
            if let position = positions[member.key] {
                result[position].value = member.value
            } else {
                positions[member.key] = result.count
                result.append(member)
            }
        }
        return result
    }
}

/// An array under construction, as ObjectBox.
final class ArrayBox {
    var elements: [JSONValue]
    private var pending: [(index: Int, slot: ObjectBox.Slot)] = []

    init(_ elements: [JSONValue] = []) {
        self.elements = elements
    }

    var count: Int { elements.count }

    func append(_ value: JSONValue) { elements.append(value) }

    func append(_ slot: ObjectBox.Slot) {
        pending.append((elements.count, slot))
        elements.append(.null)
    }

    func finish(sortedKeys: Bool) -> JSONValue {
        for (index, slot) in pending { elements[index] = slot.finish(sortedKeys: sortedKeys) }
        pending = []
        return .array(elements)
    }
}

extension ObjectBox.Slot {
    func finish(sortedKeys: Bool) -> JSONValue {
        switch self {
        case .object(let box): return box.finish(sortedKeys: sortedKeys)
        case .array(let box): return box.finish(sortedKeys: sortedKeys)
        case .encoder(let encoder): return encoder.finish() ?? .object(JSONObject())
        }
    }
}
