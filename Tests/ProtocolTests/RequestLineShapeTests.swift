import BrokerJSON
import BrokerProtocol
import BrokerWire
import XCTest

/// The scan that recognises a repeated request line before it is parsed: it must find exactly the id and the
/// correlation id the parser finds, and give up on every line it cannot be sure of.
final class RequestLineShapeTests: XCTestCase {
    private func shape(_ text: String) -> RequestLineShape? { RequestLineShape(Array(text.utf8)) }

    private func line(id: String = "1", correlationId: String? = nil, account: String = "uid.utid") -> String {
        let cid = correlationId.map { #","correlationId":\#($0)"# } ?? ""
        return #"{"jsonrpc":"2.0","id":\#(id),"method":"acquireTokenSilently","params":{"clientId":"app","scopes":["User.Read"],"account":{"homeAccountId":"\#(account)"}\#(cid)}}"#
    }

    func testTheIdAndTheCorrelationIdAreCutOutOfTheKey() throws {
        let one = try XCTUnwrap(shape(line(id: "1", correlationId: #""c-1""#)))
        let two = try XCTUnwrap(shape(line(id: #""req-2""#, correlationId: #""another""#)))
        XCTAssertEqual(one.key, two.key)
        XCTAssertEqual(one.key.bytes.filter { $0 == 0 }.count, 2)
        XCTAssertEqual(one.id, "1")
        XCTAssertEqual(two.id, #""req-2""#)
        XCTAssertEqual(one.correlationId, .some("c-1"))
        XCTAssertEqual(two.correlationId, .some("another"))

        let none = try XCTUnwrap(shape(line(id: "7")))
        XCTAssertEqual(none.correlationId, .some(nil))
        XCTAssertNotEqual(none.key, one.key, "a line without a correlation id is another line")
        XCTAssertEqual(try XCTUnwrap(shape(line(id: "7", correlationId: "null"))).correlationId, .some(nil))
        XCTAssertEqual(try XCTUnwrap(shape(line(correlationId: #""caf\u00e9 \"q\"""#))).correlationId, .some(#"café "q""#))
    }

    func testAnythingElseThatDiffersMakesAnotherKey() throws {
        let base = try XCTUnwrap(shape(line())).key
        XCTAssertNotEqual(try XCTUnwrap(shape(line(account: "other.utid"))).key, base)
        XCTAssertNotEqual(try XCTUnwrap(shape(line().replacingOccurrences(of: #""id":1,"#, with: #""id": 1,"#))).key, base,
                          "whitespace is part of the key (a miss, never a wrong answer)")
    }

    func testItFindsWhatTheParserFinds() throws {
        let lines = [
            line(), line(id: #""x\"y""#, correlationId: #""c""#), line(id: "null"), line(id: "-1.5e3", correlationId: #""""#),
            #"  {"id" : 3 , "params" : { "correlationId" : "a" , "n" : [1, {"correlationId": 2}] }, "jsonrpc":"2.0","method":"m"}  "#,
            #"{"params":{"account":{"correlationId":"deep"}},"jsonrpc":"2.0","method":"m","id":"s"}"#,
            #"{"jsonrpc":"2.0","method":"m","id":9,"params":{"x":"}{][,:\"\\","correlationId":"after a tricky string"}}"#,
        ]
        for text in lines {
            let found = try XCTUnwrap(shape(text), text)
            guard case .single(.success(let request)) = RPCEnvelope.parse(Array(text.utf8)) else { return XCTFail(text) }
            XCTAssertEqual(found.id, request.id, text)
            var parsed: String?
            if case .object(let params)? = request.params, case .string(let value)? = params["correlationId"] { parsed = value }
            XCTAssertEqual(found.correlationId, .some(parsed), text)
        }
    }

    func testLinesItCannotBeSureOfAreLeftToTheParser() {
        let refused = [
            "", "[" + line() + "]", "42", #"{"jsonrpc":"2.0","method":"m"}"#,  // a batch, not an object, no id
            #"{"\u0069d":1,"jsonrpc":"2.0","method":"m"}"#,  // an escaped key could spell "id"
            #"{"id":1,"id":2,"jsonrpc":"2.0","method":"m"}"#,
            #"{"id":1,"params":{"correlationId":"a","correlationId":"b"}}"#,
            #"{"id":1,"params":{"a":1},"params":{"correlationId":"b"}}"#,
            #"{"id":1,"params":{"\u0063orrelationId":"a"}}"#,
            #"{"id":{"x":1},"method":"m"}"#, #"{"id":[1],"method":"m"}"#,
            #"{"id":1,"params":{"correlationId":{"a":1}}}"#,
            #"{"id":1,"method":"m""#, #"{"id":1,"method":"m"}}"#, #"{"id":1,"method":"m"} x"#, #"{"id":1,"method":"unterminated}"#,
            "{\"id\":1,\"method\":\"raw\u{1}control\"}", #"{"id":1,"method":"m",}x"#, #"{"id":1 2}"#, #"{"id":1,3:4}"#,
        ]
        for text in refused { XCTAssertNil(shape(text), text) }
        // Found, but not a usable id or correlation id: the memo then leaves the line to the parser.
        XCTAssertNil(shape(#"{"id":true,"method":"m"}"#)?.id)
        XCTAssertNil(shape(#"{"id":1,"params":{"correlationId":7}}"#)?.correlationId)
    }
}
