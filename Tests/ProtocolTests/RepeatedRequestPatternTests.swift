import BrokerJSON
import BrokerProtocol
import BrokerWire
import XCTest

/// The pattern that recognises a request asked again by comparing bytes: whenever it says "the same request", the
/// parser must read the line as that request with the id and correlation id it reports; and it must say so for the
/// lines an app really repeats.
final class RepeatedRequestPatternTests: XCTestCase {
    private func line(id: String = "1", correlationId: String? = nil, first: Bool = false) -> String {
        let cid = correlationId.map { #""correlationId":\#($0)"# }
        let params = [first ? cid : nil, #""clientId":"app","scopes":["User.Read"],"account":{"homeAccountId":"uid.utid"}"#,
                      first ? nil : cid].compactMap { $0 }.joined(separator: ",")
        return #"{"jsonrpc":"2.0","id":\#(id),"method":"acquireTokenSilently","params":{\#(params)}}"#
    }

    private func pattern(_ text: String) throws -> RepeatedRequestPattern {
        let bytes = Array(text.utf8)
        return RepeatedRequestPattern(line: bytes, shape: try XCTUnwrap(RequestLineShape(bytes), text))
    }

    private func match(_ pattern: RepeatedRequestPattern, _ text: String) -> RepeatedRequestPattern.Values? {
        Array(text.utf8).withUnsafeBytes { pattern.match($0) }
    }

    func testTheSameRequestWithAnotherIdOrCorrelationIdMatches() throws {
        for first in [false, true] {
            let withCorrelation = try pattern(line(id: "1", correlationId: #""c-1""#, first: first))
            let same = try XCTUnwrap(match(withCorrelation, line(id: "1", correlationId: #""c-1""#, first: first)))
            XCTAssertEqual(same.id, "1")
            XCTAssertEqual(same.correlationId, "c-1")
            let other = try XCTUnwrap(match(withCorrelation, line(id: #""req-ü""#, correlationId: #""another""#, first: first)))
            XCTAssertEqual(other.id, #""req-ü""#)
            XCTAssertEqual(other.correlationId, "another")
            XCTAssertNil(try XCTUnwrap(match(withCorrelation, line(id: "123456789012345", correlationId: "null", first: first))).correlationId)
        }
        let plain = try pattern(line(id: #""a""#))
        XCTAssertEqual(match(plain, line(id: "0"))?.id, "0")
        XCTAssertEqual(match(plain, line(id: #""""#))?.id, #""""#)
        XCTAssertNil(match(plain, line(id: "2", correlationId: #""c""#)), "a correlation id the pattern does not have")
    }

    func testValuesItDoesNotTakeAreLeftToTheParser() throws {
        let base = try pattern(line(id: "1", correlationId: #""c""#))
        for id in ["-1", "1.5", "1e3", "01", "1234567890123456", "null", "true", #""a\"b""#, #""a\u0041""#, "{}", "[1]", #""open"#] {
            XCTAssertNil(match(base, line(id: id, correlationId: #""c""#)), "id \(id)")
        }
        for correlationId in ["7", "true", #""x\ny""#, "{}", "[]", #""open"#] {
            XCTAssertNil(match(base, line(id: "1", correlationId: correlationId)), "correlationId \(correlationId)")
        }
        XCTAssertNil(match(base, line(id: "1", correlationId: "\"a\u{1}b\"")), "a control character")
        var invalidUTF8 = Array(line(id: #""xx""#, correlationId: #""c""#).utf8)
        let at = try XCTUnwrap(invalidUTF8.firstIndex(of: UInt8(ascii: "x")))
        invalidUTF8[at] = 0xFF
        XCTAssertNil(invalidUTF8.withUnsafeBytes { base.match($0) }, "an id that is not UTF-8")
    }

    func testAnyOtherDifferenceIsAnotherRequest() throws {
        let base = try pattern(line())
        let text = line()
        XCTAssertNil(match(base, text.replacingOccurrences(of: "User.Read", with: "User.Write")))
        XCTAssertNil(match(base, text + " "))
        XCTAssertNil(match(base, " " + text))
        XCTAssertNil(match(base, String(text.dropLast())))
        XCTAssertNil(match(base, text.replacingOccurrences(of: #""id":1,"#, with: #""id":1 ,"#)))
        XCTAssertNil(match(base, ""))
        // A longer value in the id's place must not swallow what follows it.
        XCTAssertNil(match(base, text.replacingOccurrences(of: #""id":1,"#, with: #""id":12"#)))
    }

    /// Lines near the pattern, made by a seeded generator: every match must be what the parser reads.
    func testEveryMatchIsWhatTheParserReads() throws {
        let ids = ["1", "42", "0", "-1", "1.5", "007", "1e2", #""s""#, #""x\"y""#, #""é""#, "null", "true", "[]", "{}", #""""#]
        let correlationIds = [#""c""#, "null", "7", #""a\nb""#, #""""#, "{}", #""ü""#, "false"]
        let templates = [line(), line(correlationId: #""c""#), line(correlationId: #""c""#, first: true), line(id: #""first""#)]
        var generator = SplitMix(seed: 0x5EED)
        var matched = 0, checked = 0
        for template in templates {
            let pattern = try pattern(template)
            guard case .single(.success(let model)) = RPCEnvelope.parse(Array(template.utf8)) else { return XCTFail(template) }
            for _ in 0..<1_500 {
                let id = ids[Int(generator.next() % UInt64(ids.count))]
                let cid = correlationIds[Int(generator.next() % UInt64(correlationIds.count))]
                var text = template.replacingOccurrences(of: #""id":1,"#, with: #""id":\#(id),"#)
                    .replacingOccurrences(of: #""id":"first","#, with: #""id":\#(id),"#)
                    .replacingOccurrences(of: #""correlationId":"c""#, with: #""correlationId":\#(cid)"#)
                var bytes = Array(text.utf8)
                if generator.next() % 3 == 0, !bytes.isEmpty {  // and a byte changed, added or removed somewhere
                    let at = Int(generator.next() % UInt64(bytes.count))
                    let byte = Array(#"{}[]",: 0a\"#.utf8)[Int(generator.next() % 11)]
                    switch generator.next() % 3 {
                    case 0: bytes[at] = byte
                    case 1: bytes.insert(byte, at: at)
                    default: bytes.remove(at: at)
                    }
                    text = String(decoding: bytes, as: UTF8.self)
                }
                checked += 1
                guard let values = bytes.withUnsafeBytes({ pattern.match($0) }) else { continue }
                matched += 1
                guard case .single(.success(let request)) = RPCEnvelope.parse(bytes) else {
                    return XCTFail("matched a line the parser refuses: \(text)")
                }
                XCTAssertEqual(request.id, values.id, text)
                XCTAssertEqual(request.method, model.method, text)
                guard case .object(var params)? = request.params, case .object(var expected)? = model.params else {
                    return XCTFail(text)
                }
                var parsedCorrelationId: String?
                if case .string(let value)? = params["correlationId"] { parsedCorrelationId = value }
                XCTAssertEqual(values.correlationId, parsedCorrelationId, text)
                params.members.removeAll { $0.key == "correlationId" }
                expected.members.removeAll { $0.key == "correlationId" }
                XCTAssertEqual(params, expected, text)
            }
        }
        // The clean repeats (a plain id and correlation id, nothing else changed) are a good share of the lines.
        XCTAssertGreaterThan(matched, checked / 10, "the pattern matched almost nothing: \(matched) of \(checked)")
    }

    /// The shape a pattern gives another line without the scan (`shape(of:)`) must be the scan's: the same key, id
    /// and correlation id. It does not check the line is JSON: a line the scan refuses may get one, and must then be
    /// one the parser refuses too (its key, the line less a valid id, then is no valid line's key, and the memo finds
    /// nothing under it). Lines of the same app with other params, keys named `id` or `correlationId` elsewhere,
    /// escapes, duplicate ids and broken lines, made by a seeded generator; it must also find the plain ones.
    func testAShapeFoundWithoutTheScanIsTheScans() throws {
        let prefixes = [#"{"jsonrpc":"2.0","id":"#, #"{"id":"#,
                        #"{"jsonrpc":"2.0","method":"acquireTokenSilently","id":"#]
        let ids = ["1", "42", #""s""#, #""x\"y""#, "1.5", "null", #""id""#, "{}"]
        let members = [#""clientId":"app""#, #""scopes":["User.Read"]"#, #""scopes":["id"]"#,
                       #""account":{"homeAccountId":"uid.utid"}"#, #""account":{"id":"x"}"#, #""correlationId":"c""#,
                       #""authority":"https://login.example/\u0041""#, #""note":"end d\"""#, #""x":{"id":2}"#,
                       #""forceRefresh":false"#, #""claims":"{}""#]
        let tails = [#","method":"acquireTokenSilently"}"#, "}", #","id":2}"#, #","extra":[1,{"a":"d"}]}"#, "", "}}"]
        var generator = SplitMix(seed: 0xC0DE)
        func pick<T>(_ list: [T]) -> T { list[Int(generator.next() % UInt64(list.count))] }
        func randomLine() -> [UInt8] {
            let params = (0..<Int(generator.next() % 5)).map { _ in pick(members) }.joined(separator: ",")
            return Array((pick(prefixes) + pick(ids) + #","params":{"# + params + "}" + pick(tails)).utf8)
        }
        var patterns: [RepeatedRequestPattern] = []
        while patterns.count < 12 {
            let bytes = randomLine()
            guard let shape = RequestLineShape(bytes) else { continue }
            patterns.append(RepeatedRequestPattern(line: bytes, shape: shape))
        }
        var found = 0, plain = 0
        for _ in 0..<20_000 {
            let pattern = pick(patterns), bytes = randomLine()
            let scanned = RequestLineShape(bytes)
            guard let shape = pattern.shape(of: bytes) else { continue }
            found += 1
            let text = String(decoding: bytes, as: UTF8.self)
            guard let scan = scanned else {
                if case .single(.success) = RPCEnvelope.parse(bytes) { XCTFail("the scan refuses a request: \(text)") }
                continue
            }
            XCTAssertEqual(shape.key, scan.key, text)
            XCTAssertEqual(shape.id, scan.id, text)
            XCTAssertEqual(shape.correlationId, scan.correlationId, text)
        }
        // And the lines an app sends again with other params: a plain id, no correlation id, nothing escaped.
        for index in 0..<200 {
            let template = line(id: "\(index)")
            let base = try pattern(template)
            let text = line(id: "\(index + 1)").replacingOccurrences(of: "User.Read", with: "Mail.Send \(index)")
            let other = Array(text.utf8)
            if let shape = base.shape(of: other) {
                plain += 1
                XCTAssertEqual(shape.key, RequestLineShape(other)?.key)
            }
        }
        XCTAssertGreaterThan(found, 1_000, "the pattern gave almost no shape: \(found)")
        XCTAssertEqual(plain, 200)
    }
}
