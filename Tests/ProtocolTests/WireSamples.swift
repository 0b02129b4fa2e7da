import BrokerJSON
import BrokerProtocol

/// The Swift side of the comparison: a type's recorded decoder shape, checked against what its encoder writes.
///
/// The recorder only sees the decoder. brokerd *writes* results and notifications, and a custom `encode(to:)` can
/// differ (AccountResult writes `"account": null` instead of leaving it out), so each type is also decoded from a
/// sample built from its recorded shape and encoded back with the protocol's own encoder: a member the encoder writes
/// as null when it was absent is marked `writtenAsNull`, and a member one side has and the other lacks is reported.
enum SwiftWireShape {
    static func of(_ type: any Codable.Type) throws -> (shape: WireShape, problems: [String]) {
        let recorded = try SchemaRecorder.shape(of: type)
        var problems: [String] = []
        var shape = recorded
        // Required members only first (absent optionals show what the encoder does with nil), then every member.
        for full in [false, true] {
            let sample = WireSamples.sample(shape, full: full)
            do {
                let encoded = try roundTrip(type, JSONWriter().bytes(sample))
                shape = WireSamples.compare(shape, sample: sample, encoded: encoded, path: "\(type)", problems: &problems)
            } catch {
                problems.append("\(type): a \(full ? "full" : "minimal") sample built from its recorded shape does not round-trip: "
                                + ProtocolCoding.describe(error) + " (sample \(JSONWriter().string(sample)))")
            }
        }
        return (shape, problems)
    }

    private static func roundTrip<T: Codable>(_ type: T.Type, _ bytes: [UInt8]) throws -> JSONValue {
        let value = try ProtocolCoding.decode(T.self, from: bytes)
        return try JSONReader.parse(try ProtocolCoding.encode(value))
    }
}

enum WireSamples {
    /// A JSON value of `shape`: with only the required members (`full == false`) or with all of them. Alternatives
    /// take the first form when minimal and the last when full, so that both forms of AccountReference get a turn.
    static func sample(_ shape: WireShape, full: Bool) -> JSONValue {
        switch shape {
        case .string: return .string("sample")
        case .integer: return .int(1)
        case .number: return .number("1.5")
        case .boolean: return .bool(true)
        case .any: return .object(JSONObject())
        case .array(let element): return .array([sample(element, full: full)])
        case .map(let value): return .object(JSONObject(["key": sample(value, full: full)]))
        case .oneOf(let alternatives): return sample((full ? alternatives.last : alternatives.first) ?? .any, full: full)
        case .object(let object):
            return .object(JSONObject(object.fields.filter { full || $0.required }.map {
                JSONObject.Member(key: $0.name, value: sample($0.shape, full: full))
            }))
        }
    }

    /// Walks a sample and what the Swift type encoded from it side by side.
    static func compare(_ shape: WireShape, sample: JSONValue, encoded: JSONValue, path: String,
                        problems: inout [String]) -> WireShape {
        switch (shape, sample, encoded) {
        case (.object(var object), .object(let sent), .object(let written)):
            for index in object.fields.indices {
                let field = object.fields[index]
                let fieldPath = "\(path).\(field.name)"
                switch (sent[field.name], written[field.name]) {
                case (nil, .null?):
                    object.fields[index].writtenAsNull = true
                case (nil, _?):
                    problems.append("\(fieldPath): encoded although the decoded sample did not have it")
                case (_?, nil):
                    problems.append("\(fieldPath): \(object.name) decodes it but does not encode it")
                case (let sentValue?, let writtenValue?):
                    object.fields[index].shape = compare(field.shape, sample: sentValue, encoded: writtenValue,
                                                         path: fieldPath, problems: &problems)
                case (nil, nil):
                    break
                }
            }
            for key in written.keys where object[key] == nil {
                problems.append("\(path).\(key): \(object.name) encodes it but never decodes it")
            }
            return .object(object)
        case (.array(let element), .array(let sent), .array(let written)) where sent.count == written.count:
            var element = element
            for (sentItem, writtenItem) in zip(sent, written) {
                element = compare(element, sample: sentItem, encoded: writtenItem, path: path + "[]", problems: &problems)
            }
            return .array(element)
        case (.map(let value), .object(let sent), .object(let written)):
            var value = value
            for member in sent.members {
                guard let writtenValue = written[member.key] else { continue }
                value = compare(value, sample: member.value, encoded: writtenValue, path: path + "{}", problems: &problems)
            }
            return .map(value)
        case (.oneOf(var alternatives), _, _):
            guard let index = alternatives.firstIndex(where: { $0.matches(sample) }) else { return shape }
            alternatives[index] = compare(alternatives[index], sample: sample, encoded: encoded, path: path, problems: &problems)
            return .oneOf(alternatives)
        case (.any, _, _), (.string, .string, .string), (.boolean, .bool, .bool),
             (.integer, .number, .number), (.number, .number, .number):
            return shape
        default:
            problems.append("\(path): encoded as \(JSONWriter().string(encoded)), expected \(shape.kind)")
            return shape
        }
    }
}

extension WireShape {
    /// Whether a JSON value has this shape's kind (only the outer kind: enough to pick an alternative).
    func matches(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.any, _), (.string, .string), (.boolean, .bool), (.integer, .number), (.number, .number),
             (.array, .array), (.object, .object), (.map, .object):
            return true
        case (.oneOf(let alternatives), _):
            return alternatives.contains { $0.matches(value) }
        default:
            return false
        }
    }
}
