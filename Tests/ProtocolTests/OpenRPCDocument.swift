import BrokerJSON
import Foundation

struct DocumentError: Error, CustomStringConvertible {
    var description: String
}

/// docs/openrpc.json, read with the project's own JSON reader (it keeps member order, which keeps failure
/// messages in document order).
struct OpenRPCDocument {
    var root: JSONValue

    init(_ root: JSONValue) { self.root = root }

    init(contentsOf path: String) throws {
        root = try JSONReader.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
    }

    subscript(key: String) -> JSONValue? { root.objectValue?[key] }

    /// Follows a local `$ref` (`#/components/schemas/Account`).
    func resolve(_ reference: String) throws -> JSONValue {
        guard reference.hasPrefix("#/") else { throw DocumentError(description: "\(reference) is not a local reference") }
        var node = root
        for part in reference.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
            let key = part.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            guard let next = node.objectValue?[key] else { throw DocumentError(description: "\(reference) does not resolve") }
            node = next
        }
        return node
    }

    /// Follows a Reference Object, or returns the object as it is.
    func dereference(_ value: JSONValue) throws -> JSONValue {
        if let reference = value.objectValue?["$ref"]?.stringValue { return try resolve(reference) }
        return value
    }

    // MARK: JSON Schema → WireShape

    struct Parsed {
        var shapes: [WireShape]
        var nullable: Bool

        var shape: WireShape {
            switch shapes.count {
            case 0: return .any
            case 1: return shapes[0]
            default: return .oneOf(shapes)
            }
        }
    }

    /// Reads the parts of a JSON Schema that make up a wire shape: `$ref`, `type` (one or a list, "null"
    /// making it nullable), `oneOf`/`anyOf` alternatives, `properties` + `required`, `items`,
    /// `additionalProperties`. Validation keywords (`enum`, `minLength`, …) narrow a value without changing its
    /// shape and are left alone.
    func shape(of schema: JSONValue, name: String, depth: Int = 0) throws -> Parsed {
        guard depth < 32 else { throw DocumentError(description: "\(name): schema nests too deep (a $ref cycle?)") }
        if case .bool(let accepted) = schema, accepted { return Parsed(shapes: [], nullable: true) }
        guard let object = schema.objectValue else { throw DocumentError(description: "\(name): a schema must be an object") }
        if let reference = object["$ref"]?.stringValue {
            let target = String(reference.split(separator: "/").last ?? "")
            return try shape(of: try resolve(reference), name: target, depth: depth + 1)
        }
        // `anyOf: [{required: [a]}, {required: [b]}]` says "a or b" about one object; only members that describe a
        // value of their own are alternatives.
        let alternatives = ((object["oneOf"]?.arrayValue ?? []) + (object["anyOf"]?.arrayValue ?? [])).filter(Self.describesValue)
        if !alternatives.isEmpty {
            var parsed = Parsed(shapes: [], nullable: false)
            for alternative in alternatives {
                let one = try shape(of: alternative, name: name, depth: depth + 1)
                parsed.nullable = parsed.nullable || one.nullable
                for shape in one.shapes where !parsed.shapes.contains(shape) { parsed.shapes.append(shape) }
            }
            return parsed
        }

        var types: [String]
        switch object["type"] {
        case .string(let type)?: types = [type]
        case .array(let list)?: types = list.compactMap(\.stringValue)
        default:
            if object["properties"] != nil || object["additionalProperties"] != nil { types = ["object"] }
            else if object["items"] != nil { types = ["array"] }
            else if let values = object["enum"]?.arrayValue { types = Self.types(of: values) }
            else { return Parsed(shapes: [.any], nullable: true) }
        }
        var parsed = Parsed(shapes: [], nullable: types.contains("null"))
        for type in types {
            switch type {
            case "null": continue
            case "string": parsed.shapes.append(.string)
            case "integer": parsed.shapes.append(.integer)
            case "number": parsed.shapes.append(.number)
            case "boolean": parsed.shapes.append(.boolean)
            case "array":
                parsed.shapes.append(.array(try object["items"].map { try shape(of: $0, name: name, depth: depth + 1).shape } ?? .any))
            case "object":
                parsed.shapes.append(try objectShape(object, name: name, depth: depth))
            default:
                throw DocumentError(description: "\(name): unknown type \"\(type)\"")
            }
        }
        return parsed
    }

    private func objectShape(_ object: JSONObject, name: String, depth: Int) throws -> WireShape {
        let properties = object["properties"]?.objectValue
        if properties == nil, let values = object["additionalProperties"], values.objectValue != nil {
            return .map(try shape(of: values, name: name, depth: depth + 1).shape)
        }
        let required = Set((object["required"]?.arrayValue ?? []).compactMap(\.stringValue))
        var fields: [WireField] = []
        for member in properties?.members ?? [] {
            let parsed = try shape(of: member.value, name: "\(name).\(member.key)", depth: depth + 1)
            fields.append(WireField(name: member.key, required: required.contains(member.key), nullable: parsed.nullable,
                                    shape: parsed.shape))
        }
        return .object(WireObject(name: name, fields: fields))
    }

    private static func describesValue(_ schema: JSONValue) -> Bool {
        guard let object = schema.objectValue else { return false }
        return ["$ref", "type", "properties", "items", "additionalProperties", "oneOf", "anyOf", "enum", "const"]
            .contains { object[$0] != nil }
    }

    private static func types(of values: [JSONValue]) -> [String] {
        var types: [String] = []
        for value in values {
            let type: String
            switch value {
            case .string: type = "string"
            case .bool: type = "boolean"
            case .null: type = "null"
            case .number(let text): type = Int64(text) != nil ? "integer" : "number"
            default: type = "object"
            }
            if !types.contains(type) { types.append(type) }
        }
        return types
    }

    // MARK: Content descriptors

    /// `params` of a method or notification as one object: what a by-name params object holds.
    func paramsShape(_ params: [JSONValue], name: String) throws -> WireObject {
        var fields: [WireField] = []
        for entry in params {
            let descriptor = try dereference(entry)
            guard let object = descriptor.objectValue, let fieldName = object["name"]?.stringValue, let schema = object["schema"] else {
                throw DocumentError(description: "\(name): a param needs a name and a schema")
            }
            if fields.contains(where: { $0.name == fieldName }) {
                throw DocumentError(description: "\(name).\(fieldName) is listed twice")
            }
            let parsed = try shape(of: schema, name: "\(name).\(fieldName)")
            fields.append(WireField(name: fieldName, required: object["required"]?.boolValue ?? false, nullable: parsed.nullable,
                                    shape: parsed.shape))
        }
        return WireObject(name: name, fields: fields)
    }
}
