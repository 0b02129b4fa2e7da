import BrokerJSON

/// Fields of every scalar kind, optional and nested, so that the decoder's conversions (integer ranges, floats,
/// strings, containers, null) all meet the fuzzer's values.
private struct Sample: Codable, Equatable {
    var text: String?
    var count: Int?
    var small: Int8?
    var unsigned: UInt32?
    var wide: Int64?
    var real: Double?
    var flag: Bool?
    var list: [Int64]?
    var map: [String: String]?
    var children: [Sample]?
    var any: JSONValue?
}

/// Any bytes read as JSON (strict and lenient) end in a value or a JSONReadError, never a trap or a stack overflow;
/// a value read survives writing (read back strictly, it is the same value); decoding into Codable types either
/// succeeds or throws, and what decodes encodes to the same bytes every time. The canonical text made from the
/// bytes (`CanonicalJSONText`) is nil or the one the strictly read value is written as.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONReader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let fast = CanonicalJSONText.of(bytes) {
        guard let value = try? JSONReader.parse(bytes) else {
            fatalError("a canonical text made from bytes that are not JSON")
        }
        var written: [UInt8] = []
        guard (try? JSONWriter.writeCanonicalWire(value, into: &written)) != nil else {
            fatalError("the tree's way throws")
        }
        require(fast == written, "the canonical text from the bytes is not the tree's")
    }
    for lenient in [false, true] {
        guard let value = try? JSONReader.parse(bytes, lenient: lenient) else { continue }
        let written = JSONWriter().bytes(value)
        guard let again = try? JSONReader.parse(written) else { fatalError("the writer's output does not read back") }
        require(again == value, "a value changed on its way through the writer")
        _ = JSONWriter(indent: 2).bytes(value)
        _ = value.integerValue
        if let sample = try? JSONValueDecoder().decode(Sample.self, from: value) {
            // Encoding is stable, not the identity: JSONValue's Codable form sorts keys, keeps one of duplicate keys
            // and writes non-integers as Double, by design.
            guard let encoded = try? JSONValueEncoder().encodeToBytes(sample),
                  let decoded = try? JSONValueDecoder().decode(Sample.self, from: encoded),
                  let again = try? JSONValueEncoder().encodeToBytes(decoded) else {
                fatalError("a decoded value does not encode and decode again")
            }
            require(again == encoded, "a value changed on its second way through Codable")
        }
        _ = try? JSONValueDecoder().decode([String: Int].self, from: value)
        _ = try? JSONValueDecoder().decode([Double].self, from: value)
    }
    return 0
}

/// A broken invariant, reported with its message (a release build's `precondition` traps without one).
private func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
