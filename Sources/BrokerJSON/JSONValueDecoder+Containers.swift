// The keyed and unkeyed containers of JSONValueDecoder.

struct KeyedValueDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ValueDecoder
    let object: JSONObject
    /// Key → index of its first member, for objects large enough that linear lookups would add up
    /// (a `[String: T]` of many entries looks up every key it lists).
    private let index: [String: Int]?

    init(decoder: ValueDecoder, object: JSONObject) {
        self.decoder = decoder
        self.object = object
        if object.members.count > 16 {
            var index: [String: Int] = [:]
            index.reserveCapacity(object.members.count)
            for (position, member) in object.members.enumerated() where index[member.key] == nil {
                index[member.key] = position
            }
            self.index = index
        } else {
            self.index = nil
        }
    }

    var codingPath: [any CodingKey] { decoder.codingPath }

    var allKeys: [Key] {
        var seen = Set<String>()
        return object.members.compactMap { seen.insert($0.key).inserted ? Key(stringValue: $0.key) : nil }
    }

    /// The first member with this key, as JSONDecoder keeps the first of duplicates.
    private func lookup(_ key: Key) -> JSONValue? {
        let name = key.stringValue
        if let index { return index[name].map { object.members[$0].value.parsedIfRaw } }
        for member in object.members where member.key == name { return member.value.parsedIfRaw }
        return nil
    }

    private func require(_ key: Key) throws -> JSONValue {
        guard let value = lookup(key) else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(
                codingPath: codingPath, debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."))
        }
        return value
    }

    /// nil for absent and for null alike.
    private func present(_ key: Key) -> JSONValue? {
        guard let value = lookup(key), value != .null else { return nil }
        return value
    }

    private func path(_ key: Key) -> [any CodingKey] { decoder.node.path(appending: key) }

    func contains(_ key: Key) -> Bool { lookup(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { try require(key) == .null }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try ValueDecoder.bool(try require(key), path(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try ValueDecoder.string(try require(key), path(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try floatingPoint(try require(key), key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try floatingPoint(try require(key), key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(try require(key), key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(try require(key), key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(try require(key), key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(try require(key), key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(try require(key), key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(try require(key), key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(try require(key), key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(try require(key), key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(try require(key), key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(try require(key), key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.decode(type, from: try require(key), at: decoder.node.appending(key))
    }

    // The stdlib's defaults for these look the key up three times (contains, decodeNil, decode).
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        try present(key).map { try ValueDecoder.bool($0, path(key)) }
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try present(key).map { try ValueDecoder.string($0, path(key)) }
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key).map { try floatingPoint($0, key) } }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(key).map { try integer($0, key) } }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try present(key).map { try integer($0, key) } }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try present(key).map { try integer($0, key) } }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = present(key) else { return nil }
        return try decoder.decode(type, from: value, at: decoder.node.appending(key))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try ValueDecoder(value: try require(key), node: decoder.node.appending(key), userInfo: decoder.userInfo)
            .container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(value: try require(key), node: decoder.node.appending(key), userInfo: decoder.userInfo)
            .unkeyedContainer()
    }

    // An absent key gives a decoder of null, as with JSONDecoder.
    func superDecoder() throws -> any Decoder {
        try ValueDecoder(value: object[ValueCodingKey.super.stringValue] ?? .null,
                         node: decoder.node.appending(ValueCodingKey.super), userInfo: decoder.userInfo)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        try ValueDecoder(value: lookup(key) ?? .null, node: decoder.node.appending(key), userInfo: decoder.userInfo)
    }

    private func integer<T: FixedWidthInteger>(_ value: JSONValue, _ key: Key) throws -> T {
        try ValueDecoder.integer(value, T.self, path(key))
    }

    private func floatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(_ value: JSONValue, _ key: Key) throws -> T {
        try ValueDecoder.floatingPoint(value, T.self, path(key))
    }
}

struct UnkeyedValueDecodingContainer: UnkeyedDecodingContainer {
    let decoder: ValueDecoder
    let elements: [JSONValue]
    private(set) var currentIndex = 0

    init(decoder: ValueDecoder, elements: [JSONValue]) {
        self.decoder = decoder
        self.elements = elements
    }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private var node: CodingPathNode { .index(currentIndex, decoder.node) }
    private var path: [any CodingKey] { node.path }

    /// The current element, not consumed; at the end, JSONDecoder's valueNotFound.
    private func peek<T>(_ type: T.Type, _ message: String = "Unkeyed container is at end.") throws -> JSONValue {
        guard currentIndex < elements.count else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(codingPath: path, debugDescription: message))
        }
        return elements[currentIndex].parsedIfRaw
    }

    /// Reads the current element with `read` (given it and a lazy path to it) and moves past it only when that
    /// succeeded.
    private mutating func next<T, R>(_ type: T.Type, _ read: (JSONValue, LazyNode) throws -> R) throws -> R {
        let result = try read(try peek(type), LazyNode(parent: decoder.node, index: currentIndex))
        currentIndex += 1
        return result
    }

    /// An element's place, made into a path node only when asked (a decoder for a nested value, or an error).
    struct LazyNode {
        let parent: CodingPathNode
        let index: Int
        var node: CodingPathNode { .index(index, parent) }
        var path: [any CodingKey] { node.path }
    }

    mutating func decodeNil() throws -> Bool {
        guard try peek(Never.self) == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) { try ValueDecoder.bool($0, $1.path) } }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) { try ValueDecoder.string($0, $1.path) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try floatingPoint(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try floatingPoint(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try next(type) { [decoder] in try decoder.decode(type, from: $0, at: $1.node) }
    }

    // At the end or on null: nil, and the index moves on (JSONDecoder does the same).
    mutating func decodeIfPresent<T: Decodable>(_ type: T.Type) throws -> T? {
        let value = currentIndex < elements.count ? elements[currentIndex].parsedIfRaw : .null
        let result = value == .null ? nil : try decoder.decode(type, from: value, at: node)
        currentIndex += 1
        return result
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next(KeyedDecodingContainer<NestedKey>.self) { [decoder] in
            try ValueDecoder(value: $0, node: $1.node, userInfo: decoder.userInfo).container(keyedBy: type)
        }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let node = self.node
        let value = try peek(UnkeyedDecodingContainer.self, "Cannot get nested unkeyed container -- unkeyed container is at end.")
        let container = try ValueDecoder(value: value, node: node, userInfo: decoder.userInfo).unkeyedContainer()
        currentIndex += 1
        return container
    }

    mutating func superDecoder() throws -> any Decoder {
        let node = self.node
        let value = try peek((any Decoder).self, "Cannot get superDecoder() -- unkeyed container is at end.")
        let superDecoder = try ValueDecoder(value: value, node: node, userInfo: decoder.userInfo)
        currentIndex += 1
        return superDecoder
    }

    private mutating func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try next(type) { try ValueDecoder.integer($0, type, $1.path) }
    }

    private mutating func floatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(_ type: T.Type) throws -> T {
        try next(type) { try ValueDecoder.floatingPoint($0, type, $1.path) }
    }
}
