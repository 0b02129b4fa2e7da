import BrokerJSON
import BrokerProtocol

/// Compares docs/openrpc.json with the Swift protocol (MethodCatalog, RPCErrorCode) in both directions and
/// returns one readable line per difference, naming the method and the field path.
struct ProtocolDriftChecker {
    static let documentName = "docs/openrpc.json"
    let document: OpenRPCDocument
    /// RPCErrorCode's constants by name (the test reads them from the source: static lets cannot be enumerated).
    let errorCodes: [(name: String, code: Int)]

    func problems() -> [String] {
        var problems: [String] = []
        checkHeader(&problems)
        checkMethods(&problems)
        checkNotifications(&problems)
        checkErrors(&problems)
        return problems
    }

    private var doc: String { Self.documentName }

    private func checkHeader(_ problems: inout [String]) {
        if document["openrpc"]?.stringValue != "1.3.2" { problems.append("\(doc): openrpc must be \"1.3.2\"") }
        let version = document["info"]?.objectValue?["version"]?.stringValue
        if version != brokerProtocolVersion {
            problems.append("\(doc): info.version is \(version ?? "missing"), brokerProtocolVersion is \(brokerProtocolVersion)")
        }
    }

    // MARK: Methods and notifications

    /// The `methods` (or `x-notifications`) entries by name; duplicates and nameless entries are problems.
    private func entries(_ member: String, _ problems: inout [String]) -> [String: JSONObject] {
        guard let list = document[member]?.arrayValue else {
            problems.append("\(doc): \(member) is missing or not an array")
            return [:]
        }
        var byName: [String: JSONObject] = [:]
        for entry in list {
            guard let object = entry.objectValue, let name = object["name"]?.stringValue else {
                problems.append("\(doc): an entry of \(member) has no name")
                continue
            }
            if byName[name] != nil { problems.append("\(name) is listed twice in \(doc) \(member)") }
            byName[name] = object
        }
        return byName
    }

    private func checkMethods(_ problems: inout [String]) {
        let documented = entries("methods", &problems)
        for method in BrokerMethod.allCases {
            let name = method.rawValue
            guard let entry = documented[name] else {
                problems.append("\(name) missing from \(doc) methods")
                continue
            }
            let signature = method.signature
            checkParams(entry, swift: signature.params, path: name, &problems)
            checkResult(entry, swift: signature.result, path: name, &problems)
            checkMethodErrors(entry, path: name, &problems)
            let documentedPrompts = entry["x-sendsPrompts"]?.boolValue ?? false
            if documentedPrompts != signature.sendsPrompts {
                problems.append("\(name): x-sendsPrompts is \(documentedPrompts) in \(doc), sendsPrompts is \(signature.sendsPrompts) in MethodCatalog")
            }
        }
        for name in documented.keys.sorted() where BrokerMethod(rawValue: name) == nil {
            problems.append("\(name) is in \(doc) methods but not in BrokerMethod")
        }
    }

    private func checkNotifications(_ problems: inout [String]) {
        let documented = entries("x-notifications", &problems)
        for notification in BrokerNotification.allCases {
            let name = notification.rawValue
            guard let entry = documented[name] else {
                problems.append("\(name) missing from \(doc) x-notifications")
                continue
            }
            checkParams(entry, swift: notification.signature.params, path: name, &problems)
        }
        for name in documented.keys.sorted() where BrokerNotification(rawValue: name) == nil {
            problems.append("\(name) is in \(doc) x-notifications but not in BrokerNotification")
        }
    }

    private func swiftShape(_ type: any Codable.Type, path: String, _ problems: inout [String]) -> WireShape? {
        do {
            let (shape, typeProblems) = try SwiftWireShape.of(type)
            problems += typeProblems.map { "\(path): \($0)" }
            return shape
        } catch {
            problems.append("\(path): \(error)")
            return nil
        }
    }

    private func checkParams(_ entry: JSONObject, swift type: any Codable.Type, path: String, _ problems: inout [String]) {
        let paramsPath = "\(path).params"
        if entry["paramStructure"]?.stringValue != "by-name" {
            problems.append("\(paramsPath): paramStructure must be \"by-name\" in \(doc)")
        }
        guard let swift = swiftShape(type, path: paramsPath, &problems) else { return }
        let swiftObject: WireObject
        switch swift {
        case .object(let object): swiftObject = object
        // A type that never looks at its decoder (NoParams) takes any params object.
        case .any: swiftObject = WireObject(name: "\(type)", fields: [])
        default:
            problems.append("\(paramsPath): \(type) is \(swift.kind), but by-name params must be an object")
            return
        }
        do {
            let documented = try document.paramsShape(entry["params"]?.arrayValue ?? [], name: paramsPath)
            compareFields(swiftObject, documented, path: paramsPath, &problems)
        } catch {
            problems.append("\(paramsPath): \(error)")
        }
    }

    private func checkResult(_ entry: JSONObject, swift type: any Codable.Type, path: String, _ problems: inout [String]) {
        let resultPath = "\(path).result"
        guard let swift = swiftShape(type, path: resultPath, &problems) else { return }
        do {
            guard let descriptor = try entry["result"].map(document.dereference)?.objectValue,
                  let schema = descriptor["schema"] else {
                problems.append("\(resultPath) missing from \(doc)")
                return
            }
            let documented = try document.shape(of: schema, name: resultPath)
            if documented.nullable { problems.append("\(resultPath): \(doc) allows null, \(type) is never null") }
            compare(swift, documented.shape, path: resultPath, type: "\(type)", &problems)
        } catch {
            problems.append("\(resultPath): \(error)")
        }
    }

    // MARK: Shapes

    private func compare(_ swift: WireShape, _ documented: WireShape, path: String, type: String, _ problems: inout [String]) {
        if case .any = swift { return }
        if case .any = documented {
            problems.append("\(path): \(swift.kind) in \(type), untyped in \(doc)")
            return
        }
        let swiftAlternatives = swift.alternatives, documentedAlternatives = documented.alternatives
        if swiftAlternatives.count == 1 && documentedAlternatives.count == 1 {
            compareOne(swift, documented, path: path, type: type, &problems)
            return
        }
        for alternative in swiftAlternatives {
            if let match = documentedAlternatives.first(where: { $0.kind == alternative.kind }) {
                compareOne(alternative, match, path: path, type: type, &problems)
            } else {
                problems.append("\(path): \(type) accepts \(alternative.kind), \(doc) does not")
            }
        }
        for alternative in documentedAlternatives where !swiftAlternatives.contains(where: { $0.kind == alternative.kind }) {
            problems.append("\(path): \(doc) allows \(alternative.kind), \(type) does not")
        }
    }

    private func compareOne(_ swift: WireShape, _ documented: WireShape, path: String, type: String, _ problems: inout [String]) {
        switch (swift, documented) {
        case (.object(let swiftObject), .object(let documentedObject)):
            compareFields(swiftObject, documentedObject, path: path, &problems)
        case (.array(let swiftElement), .array(let documentedElement)):
            compare(swiftElement, documentedElement, path: path + "[]", type: type, &problems)
        case (.map(let swiftValue), .map(let documentedValue)):
            compare(swiftValue, documentedValue, path: path + "{}", type: type, &problems)
        default:
            if swift.kind != documented.kind {
                problems.append("\(path): \(swift.kind) in \(type), \(documented.kind) in \(doc)")
            }
        }
    }

    private func compareFields(_ swift: WireObject, _ documented: WireObject, path: String, _ problems: inout [String]) {
        let type = swift.name
        for field in swift.fields {
            let fieldPath = "\(path).\(field.name)"
            guard let documentedField = documented[field.name] else {
                problems.append("\(fieldPath) missing from \(doc)")
                continue
            }
            switch (field.required, documentedField.required) {
            case (true, false):
                problems.append("\(fieldPath): required in \(type), optional in \(doc)")
            case (true, true) where documentedField.nullable:
                problems.append("\(fieldPath): \(doc) allows null, \(type) does not")
            case (false, true) where !(field.writtenAsNull && documentedField.nullable):
                problems.append(field.writtenAsNull
                    ? "\(fieldPath): \(type) writes null when it has no value; \(doc) must allow null"
                    : "\(fieldPath): optional in \(type), required in \(doc)")
            case (false, false) where field.writtenAsNull:
                problems.append("\(fieldPath): \(type) always writes it (null when it has no value); \(doc) must list it as required and nullable")
            default:
                break
            }
            compare(field.shape, documentedField.shape, path: fieldPath, type: type, &problems)
        }
        for documentedField in documented.fields where swift[documentedField.name] == nil {
            problems.append("\(path).\(documentedField.name) is in \(doc) but not in \(type)")
        }
    }

    // MARK: Errors

    private func checkErrors(_ problems: inout [String]) {
        guard let components = document["components"]?.objectValue?["errors"]?.objectValue else {
            problems.append("\(doc): components/errors is missing")
            return
        }
        let swiftCodes = Set(errorCodes.map(\.code))
        for (name, code) in errorCodes {
            let documented = components.members.filter { $0.value.objectValue?["code"]?.integerValue == Int64(code) }
            if documented.isEmpty {
                problems.append("RPCErrorCode.\(name) (\(code)) missing from \(doc) components/errors")
            } else if let keyed = components[name], keyed.objectValue?["code"]?.integerValue != Int64(code) {
                problems.append("components/errors/\(name) in \(doc) does not have RPCErrorCode.\(name)'s code \(code)")
            }
        }
        for member in components.members {
            guard let code = member.value.objectValue?["code"]?.integerValue else {
                problems.append("components/errors/\(member.key) in \(doc) has no integer code")
                continue
            }
            if !swiftCodes.contains(Int(code)) {
                problems.append("components/errors/\(member.key) in \(doc) has code \(code), which RPCErrorCode does not define")
            }
        }
    }

    private func checkMethodErrors(_ entry: JSONObject, path: String, _ problems: inout [String]) {
        let swiftCodes = Set(errorCodes.map(\.code))
        for error in entry["errors"]?.arrayValue ?? [] {
            do {
                let resolved = try document.dereference(error)
                guard let code = resolved.objectValue?["code"]?.integerValue else {
                    problems.append("\(path).errors: an error in \(doc) has no integer code")
                    continue
                }
                if !swiftCodes.contains(Int(code)) {
                    problems.append("\(path).errors: code \(code) in \(doc) is not defined by RPCErrorCode")
                }
            } catch {
                problems.append("\(path).errors: \(error)")
            }
        }
    }
}
