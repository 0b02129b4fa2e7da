import BrokerJSON
import BrokerProtocol
import Foundation
import XCTest

/// docs/openrpc.json must describe exactly what the Swift protocol types put on the wire. The Swift side is
/// derived from MethodCatalog by recording each type's decoder (SchemaRecorder), never from a hand-kept list, so a
/// field added to a params or result type fails here until the document has it too.
final class OpenRPCDocumentTests: XCTestCase {
    /// The package root, found from this file rather than the working directory (`swift test` may run anywhere).
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private func loadDocument() throws -> OpenRPCDocument {
        try OpenRPCDocument(contentsOf: Self.packageRoot.appendingPathComponent("docs/openrpc.json").path)
    }

    /// RPCErrorCode's constants, read from its source: static lets cannot be enumerated at run time, and a list
    /// written here would not notice a new code.
    private func errorCodes() throws -> [(name: String, code: Int)] {
        let source = try String(contentsOf: Self.packageRoot.appendingPathComponent("Sources/BrokerProtocol/JSONRPC.swift"),
                                encoding: .utf8)
        guard let start = source.range(of: "enum RPCErrorCode {"),
              let end = source.range(of: "\n}", range: start.upperBound..<source.endIndex) else {
            XCTFail("enum RPCErrorCode not found in Sources/BrokerProtocol/JSONRPC.swift")
            return []
        }
        let body = source[start.upperBound..<end.lowerBound]
        return body.matches(of: /static\s+let\s+(\w+)\s*(?::\s*Int\s*)?=\s*(-?\d+)/).compactMap { match in
            Int(match.output.2).map { (String(match.output.1), $0) }
        }
    }

    private func checker(_ document: OpenRPCDocument) throws -> ProtocolDriftChecker {
        ProtocolDriftChecker(document: document, errorCodes: try errorCodes())
    }

    // MARK: The document

    func testDocumentMatchesSwiftProtocol() throws {
        let problems = try checker(try loadDocument()).problems()
        for problem in problems { XCTFail(problem) }
    }

    func testErrorCodesAreReadFromTheSource() throws {
        let codes = Dictionary(uniqueKeysWithValues: try errorCodes().map { ($0.name, $0.code) })
        // A spot check that the source scan sees the real constants, at both ends of the enum.
        XCTAssertEqual(codes["parseError"], RPCErrorCode.parseError)
        XCTAssertEqual(codes["permissionDenied"], RPCErrorCode.permissionDenied)
        XCTAssertEqual(codes["serverError"], RPCErrorCode.serverError)
        XCTAssertGreaterThanOrEqual(codes.count, 15)
    }

    // MARK: The checker can fail

    func testCheckerReportsRemovedResultFieldAndExtraParam() throws {
        var document = try loadDocument()
        document.root = edit(document.root, [.key("components"), .key("schemas"), .key("TokenResult")]) { schema in
            schema = edit(schema, [.key("properties")]) { $0 = removing("source", from: $0) }
            schema = edit(schema, [.key("required")]) { $0 = .array(($0.arrayValue ?? []).filter { $0 != .string("source") }) }
        }
        document.root = edit(document.root, [.key("methods"), .named("acquireTokenSilently"), .key("params")]) { params in
            params = .array((params.arrayValue ?? []) + [.object(JSONObject([
                "name": .string("bogusParam"), "required": .bool(false), "schema": .object(JSONObject(["type": .string("string")])),
            ]))])
        }

        let problems = try checker(document).problems()
        XCTAssertTrue(problems.contains("acquireTokenSilently.result.source missing from docs/openrpc.json"), "\(problems)")
        XCTAssertTrue(problems.contains("acquireTokenInteractively.result.source missing from docs/openrpc.json"), "\(problems)")
        XCTAssertTrue(problems.contains("acquireTokenSilently.params.bogusParam is in docs/openrpc.json but not in AcquireTokenSilentlyParams"),
                      "\(problems)")
        XCTAssertEqual(problems.count, 3, "\(problems)")
    }

    func testCheckerReportsTypeRequirednessMethodAndErrorDrift() throws {
        var document = try loadDocument()
        let forceRefresh: [Step] = [.key("methods"), .named("acquireTokenSilently"), .key("params"), .named("forceRefresh")]
        document.root = edit(document.root, forceRefresh + [.key("schema")]) { $0 = .object(JSONObject(["type": .string("string")])) }
        document.root = edit(document.root, [.key("methods"), .named("getAccount"), .key("params"), .named("clientId")]) {
            $0 = edit($0, [.key("required")]) { $0 = .bool(false) }
        }
        document.root = edit(document.root, [.key("components"), .key("schemas"), .key("AccountResult")]) {
            $0 = edit($0, [.key("required")]) { $0 = .array([]) }
        }
        document.root = edit(document.root, [.key("x-notifications")]) {
            $0 = .array(($0.arrayValue ?? []).filter { $0.objectValue?["name"] != .string("deviceCode") })
        }
        document.root = edit(document.root, [.key("methods")]) {
            $0 = .array(($0.arrayValue ?? []) + [.object(JSONObject(["name": .string("unknownMethod")]))])
        }
        document.root = edit(document.root, [.key("components"), .key("errors")]) { $0 = removing("userCanceled", from: $0) }

        let problems = Set(try checker(document).problems())
        let expected: Set<String> = [
            "acquireTokenSilently.params.forceRefresh: boolean in AcquireTokenSilentlyParams, string in docs/openrpc.json",
            "getAccount.params.clientId: required in GetAccountParams, optional in docs/openrpc.json",
            "getAccount.result.account: AccountResult always writes it (null when it has no value); "
                + "docs/openrpc.json must list it as required and nullable",
            "deviceCode missing from docs/openrpc.json x-notifications",
            "unknownMethod is in docs/openrpc.json methods but not in BrokerMethod",
            "RPCErrorCode.userCanceled (-50005) missing from docs/openrpc.json components/errors",
            "acquireTokenInteractively.errors: #/components/errors/userCanceled does not resolve",
        ]
        XCTAssertEqual(problems.subtracting(expected), [], "unexpected problems")
        XCTAssertEqual(expected.subtracting(problems), [], "problems not reported")
    }

    // MARK: The recorder

    func testRecorderSeesRequiredOptionalAndTypes() throws {
        guard case .object(let params) = try SchemaRecorder.shape(of: AcquireTokenSilentlyParams.self) else {
            return XCTFail("AcquireTokenSilentlyParams is not an object")
        }
        XCTAssertEqual(params["clientId"], WireField(name: "clientId", required: true, nullable: false, shape: .string))
        XCTAssertEqual(params["scopes"]?.shape, .array(.string))
        XCTAssertEqual(params["forceRefresh"], WireField(name: "forceRefresh", required: false, nullable: true, shape: .boolean))

        guard case .object(let status) = try SchemaRecorder.shape(of: StatusResult.self) else { return XCTFail("StatusResult") }
        XCTAssertEqual(status["pid"]?.shape, .integer)
        XCTAssertEqual(status["lastWrite"]?.required, false)
        guard case .object(let keyStore)? = status["keyStore"]?.shape else { return XCTFail("StatusResult.keyStore") }
        XCTAssertEqual(keyStore.name, "KeyStoreInfo")
    }

    func testRecorderSeesBothFormsOfAccountReference() throws {
        let shape = try SchemaRecorder.shape(of: AccountReference.self)
        XCTAssertEqual(shape, .oneOf([.string, .object(WireObject(name: "AccountReference", fields: [
            WireField(name: "homeAccountId", required: false, nullable: true, shape: .string),
            WireField(name: "username", required: false, nullable: true, shape: .string),
        ]))]))
    }

    func testJSONValueIsAnyJSONAndNullWrittenMembersAreFound() throws {
        guard case .object(let account) = try SchemaRecorder.shape(of: Account.self) else { return XCTFail("Account") }
        XCTAssertEqual(account["accountClaims"]?.shape, .any)
        XCTAssertEqual(account["accountClaims"]?.required, false)

        let (result, problems) = try SwiftWireShape.of(AccountResult.self)
        XCTAssertEqual(problems, [])
        guard case .object(let object) = result else { return XCTFail("AccountResult") }
        XCTAssertEqual(object["account"]?.writtenAsNull, true)
        XCTAssertEqual(object["account"]?.required, false)
    }

    /// Shapes no protocol type has yet, so that the recorder is ready when one does.
    func testRecorderHandlesDictionariesNestedContainersAndConditionalKeys() throws {
        struct Custom: Codable {
            var labels: [String: Int]
            var window: (from: Int64, to: Int64?)
            var legacy: String?
            enum Keys: String, CodingKey { case labels, window, from, to, legacy }
            init(from decoder: Decoder) throws {
                let container = try decoder.container(keyedBy: Keys.self)
                labels = try container.decode([String: Int].self, forKey: .labels)
                let window = try container.nestedContainer(keyedBy: Keys.self, forKey: .window)
                self.window = (try window.decode(Int64.self, forKey: .from), try window.decodeIfPresent(Int64.self, forKey: .to))
                legacy = container.contains(.legacy) ? try container.decode(String.self, forKey: .legacy) : nil
            }
            func encode(to encoder: Encoder) throws {}
        }
        guard case .object(let custom) = try SchemaRecorder.shape(of: Custom.self) else { return XCTFail("Custom") }
        XCTAssertEqual(custom["labels"]?.shape, .map(.integer))
        XCTAssertEqual(custom["legacy"]?.required, false)
        guard case .object(let window)? = custom["window"]?.shape else { return XCTFail("Custom.window") }
        XCTAssertEqual(window["from"]?.required, true)
        XCTAssertEqual(window["to"]?.required, false)
    }

    // MARK: Editing JSON

    private enum Step {
        case key(String)
        /// The element of an array whose `name` is this.
        case named(String)
    }

    private func edit(_ value: JSONValue, _ path: [Step], _ change: (inout JSONValue) -> Void) -> JSONValue {
        guard let step = path.first else {
            var value = value
            change(&value)
            return value
        }
        let rest = Array(path.dropFirst())
        switch (step, value) {
        case (.key(let key), .object(var object)):
            guard let member = object[key] else { XCTFail("no member \(key)"); return value }
            object[key] = edit(member, rest, change)
            return .object(object)
        case (.named(let name), .array(var items)):
            guard let index = items.firstIndex(where: { $0.objectValue?["name"] == .string(name) }) else {
                XCTFail("no element named \(name)")
                return value
            }
            items[index] = edit(items[index], rest, change)
            return .array(items)
        default:
            XCTFail("cannot follow \(step)")
            return value
        }
    }

    private func removing(_ key: String, from value: JSONValue) -> JSONValue {
        guard var object = value.objectValue else { return value }
        object[key] = nil
        return .object(object)
    }
}
