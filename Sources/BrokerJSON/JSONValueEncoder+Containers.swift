// The keyed and unkeyed containers of JSONValueEncoder.

struct KeyedValueEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: ValueEncoder
    let box: ObjectBox

    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ value: JSONValue, _ key: Key) { box.append(key.stringValue, value) }
    private func path(_ key: Key) -> [any CodingKey] { encoder.node.path(appending: key) }

    func encodeNil(forKey key: Key) { set(.null, key) }
    func encode(_ value: Bool, forKey key: Key) { set(.bool(value), key) }
    func encode(_ value: String, forKey key: Key) { set(.string(value), key) }
    func encode(_ value: Double, forKey key: Key) throws { set(try ValueEncoder.number(value, path(key)), key) }
    func encode(_ value: Float, forKey key: Key) throws { set(try ValueEncoder.number(value, path(key)), key) }
    func encode(_ value: Int, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: Int8, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: Int16, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: Int32, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: Int64, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: UInt, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: UInt8, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: UInt16, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: UInt32, forKey key: Key) { set(.number(String(value)), key) }
    func encode(_ value: UInt64, forKey key: Key) { set(.number(String(value)), key) }

    func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(try encoder.encode(value, at: encoder.node.appending(key)), key)
    }

    // The stdlib's defaults go through the generic `encode`; these keep optional scalars on the direct path.
    func encodeIfPresent(_ value: String?, forKey key: Key) { if let value { set(.string(value), key) } }
    func encodeIfPresent(_ value: Bool?, forKey key: Key) { if let value { set(.bool(value), key) } }
    func encodeIfPresent(_ value: Int?, forKey key: Key) { if let value { set(.number(String(value)), key) } }
    func encodeIfPresent(_ value: Int64?, forKey key: Key) { if let value { set(.number(String(value)), key) } }

    func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = ObjectBox()
        box.append(key.stringValue, .object(nested))
        let nestedEncoder = ValueEncoder(node: encoder.node.appending(key), options: encoder.options)
        return KeyedEncodingContainer(KeyedValueEncodingContainer<NestedKey>(encoder: nestedEncoder, box: nested))
    }

    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = ArrayBox()
        box.append(key.stringValue, .array(nested))
        let nestedEncoder = ValueEncoder(node: encoder.node.appending(key), options: encoder.options)
        return UnkeyedValueEncodingContainer(encoder: nestedEncoder, box: nested)
    }

    func superEncoder() -> any Encoder { superEncoder(named: ValueCodingKey.super) }
    func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key) }

    /// An encoder whose value lands under `key` once its parent is finished (it may be used after this returns).
    private func superEncoder(named key: some CodingKey) -> any Encoder {
        let nested = ValueEncoder(node: encoder.node.appending(key), options: encoder.options)
        box.append(key.stringValue, .encoder(nested))
        return nested
    }
}

struct UnkeyedValueEncodingContainer: UnkeyedEncodingContainer {
    let encoder: ValueEncoder
    let box: ArrayBox

    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { box.count }

    private func append(_ value: JSONValue) { box.append(value) }
    private var node: CodingPathNode { .index(box.count, encoder.node) }

    func encodeNil() { append(.null) }
    func encode(_ value: Bool) { append(.bool(value)) }
    func encode(_ value: String) { append(.string(value)) }
    func encode(_ value: Double) throws { append(try ValueEncoder.number(value, node.path)) }
    func encode(_ value: Float) throws { append(try ValueEncoder.number(value, node.path)) }
    func encode(_ value: Int) { append(.number(String(value))) }
    func encode(_ value: Int8) { append(.number(String(value))) }
    func encode(_ value: Int16) { append(.number(String(value))) }
    func encode(_ value: Int32) { append(.number(String(value))) }
    func encode(_ value: Int64) { append(.number(String(value))) }
    func encode(_ value: UInt) { append(.number(String(value))) }
    func encode(_ value: UInt8) { append(.number(String(value))) }
    func encode(_ value: UInt16) { append(.number(String(value))) }
    func encode(_ value: UInt32) { append(.number(String(value))) }
    func encode(_ value: UInt64) { append(.number(String(value))) }

    func encode<T: Encodable>(_ value: T) throws {
        append(try encoder.encode(value, at: node))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nestedEncoder = ValueEncoder(node: node, options: encoder.options)
        let nested = ObjectBox()
        box.append(.object(nested))
        return KeyedEncodingContainer(KeyedValueEncodingContainer<NestedKey>(encoder: nestedEncoder, box: nested))
    }

    func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nestedEncoder = ValueEncoder(node: node, options: encoder.options)
        let nested = ArrayBox()
        box.append(.array(nested))
        return UnkeyedValueEncodingContainer(encoder: nestedEncoder, box: nested)
    }

    func superEncoder() -> any Encoder {
        let nested = ValueEncoder(node: node, options: encoder.options)
        box.append(.encoder(nested))
        return nested
    }
}
