import BrokerJSON
import BrokerProtocol
import BrokerWire

/// A request line from any local process: the envelope parser and the line-shape scanner end without a trap on any
/// bytes; they agree on the id and the correlation id of a valid single request; every answer brokerd would write is valid JSON; and the
/// params decode (or are refused) as every method's params type.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRPCLine(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let line = Array(UnsafeBufferPointer(start: data, count: size))
    let shape = RequestLineShape(line)
    if let shape {
        _ = shape.correlationId
        _ = shape.key.hashValue
    }
    switch RPCEnvelope.parse(line) {
    case .single(let result):
        if case .success(let request) = result, let shape {
            require(shape.id == request.id, "the line shape and the envelope disagree on the id")
            // The shape reads a plain correlation id itself, without the parser: it must read what the parser reads.
            if case .some(.some(let text)) = shape.correlationId {
                guard case .object(let params)? = request.params, case .string(let parsed)? = params["correlationId"] else {
                    fatalError("the line shape found a correlation id the envelope does not have")
                }
                require(text == parsed, "the line shape and the envelope disagree on the correlation id")
            }
        }
        check(result)
    case .batch(let results):
        results.forEach(check)
    case .unusable(let error):
        checkAnswer(RPCEnvelope.failure(id: "null", error: error))
    }
    return 0
}

private func check(_ result: Result<RPCRequest, RPCFailure>) {
    switch result {
    case .success(let request):
        for method in BrokerMethod.allCases {
            _ = try? decodeParams(method.signature.params, request.params ?? .object(JSONObject()))
        }
        let error = RPCError(code: RPCErrorCode.methodNotFound, message: "method not found: \(request.method)")
        checkAnswer(RPCEnvelope.failure(id: request.id ?? "null", error: error))
        checkAnswer(RPCEnvelope.success(id: request.id ?? "null", resultJSON: Array("{}".utf8)))
    case .failure(let failure):
        checkAnswer(RPCEnvelope.failure(id: failure.id, error: failure.error))
    }
}

private func decodeParams<T: Decodable>(_ type: T.Type, _ params: JSONValue) throws -> T {
    try ProtocolCoding.decode(type, from: params)
}

private func checkAnswer(_ answer: [UInt8]) {
    require(!answer.contains(0x0A), "an answer holds a raw newline (it would split the line framing)")
    guard case .object? = try? JSONReader.parse(answer) else { fatalError("an answer is not a JSON object") }
}

/// A broken invariant, reported with its message (a release build's `precondition` traps without one).
private func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
