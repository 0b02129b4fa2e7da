import BrokerJSON

/// JSON-RPC 2.0 error codes: the standard protocol faults, brokerd's server errors (-32000…-32099, reserved by
/// the spec for implementations) and the MSAL error vocabulary apps act on (SPEC §2).
public enum RPCErrorCode {
    public static let parseError = -32700
    public static let invalidRequest = -32600
    public static let methodNotFound = -32601
    public static let invalidParams = -32602
    public static let internalError = -32603

    /// The peer runs as another user (SO_PEERCRED) and was refused.
    public static let permissionDenied = -32001
    /// The connection cap was reached.
    public static let tooManyConnections = -32002
    /// A message exceeded the 1 MiB limit; the connection is closed after this error.
    public static let messageTooLarge = -32003
    /// The daemon is shutting down and takes no new requests.
    public static let shuttingDown = -32004
    /// brokerd's app policy refused this app the client ID (`data`: app, clientId, reason). Not InteractionRequired:
    /// an app must not answer it by starting a sign-in. The user grants with `brokerctl apps allow`.
    public static let appNotAllowed = -32005

    public static let brokerInternal = -50000
    public static let interactionRequired = -50002
    public static let serverDeclinedScopes = -50003
    public static let serverProtectionPoliciesRequired = -50004
    public static let userCanceled = -50005
    public static let serverError = -50006
}

public struct RPCError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: Int
    public var message: String
    public var data: JSONValue?

    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public var description: String { "\(message) (JSON-RPC error \(code))" }

    public var json: JSONValue {
        var object = JSONObject(["code": .int(code), "message": .string(message)])
        if let data { object["data"] = data }
        return .object(object)
    }

    public init?(json: JSONValue) {
        guard let object = json.objectValue, let code = object["code"]?.integerValue,
              let message = object["message"]?.stringValue else { return nil }
        self.init(code: Int(code), message: message, data: object["data"])
    }

    /// `data.reason`: a stable machine-readable word for errors that share a code.
    public static func invalidParams(_ message: String, reason: String? = nil) -> RPCError {
        RPCError(code: RPCErrorCode.invalidParams, message: message,
                 data: reason.map { .object(JSONObject(["reason": .string($0)])) })
    }
}

/// One request as it arrived. `id` is the raw JSON text of the id (echoed verbatim in the answer); nil for a
/// notification. `params` is the params object as the envelope's reader parsed it (decode it with
/// `ProtocolCoding.decode(_:from:)`); nil when the request had none.
public struct RPCRequest: Sendable {
    public var id: String?
    public var method: String
    public var params: JSONValue?

    public var isNotification: Bool { id == nil }
}

/// A line of input: one request, a batch, or something that is not a request at all.
public enum RPCIncoming: Sendable {
    case single(Result<RPCRequest, RPCFailure>)
    case batch([Result<RPCRequest, RPCFailure>])
    /// Not parseable: a single error answer with id null.
    case unusable(RPCError)
}

/// A request that could not be understood, with the id to answer under (raw JSON, "null" when unknown).
public struct RPCFailure: Error, Sendable {
    public var id: String
    public var error: RPCError
}

public enum RPCEnvelope {
    /// Splits a message (one line, without its newline) into requests. Never throws: every fault becomes the
    /// JSON-RPC error the spec prescribes.
    public static func parse(_ line: [UInt8]) -> RPCIncoming {
        var reader = JSONReader(line)
        do {
            switch try reader.peekKind() {
            case .object:
                let request = try readRequest(&reader)
                try reader.expectEnd()
                return .single(request)
            case .array:
                var requests: [Result<RPCRequest, RPCFailure>] = []
                try reader.readArray { (reader) throws(JSONReadError) in
                    if try reader.peekKind() == .object {
                        requests.append(try readRequest(&reader))
                    } else {
                        _ = try reader.readValue()
                        requests.append(.failure(RPCFailure(id: "null", error: invalidRequest("a batch element must be an object"))))
                    }
                }
                try reader.expectEnd()
                if requests.isEmpty { return .unusable(invalidRequest("an empty batch is not a request")) }
                return .batch(requests)
            default:
                _ = try reader.readValue()
                try reader.expectEnd()
                return .unusable(invalidRequest("a request must be a JSON object or a batch array"))
            }
        } catch {
            return .unusable(RPCError(code: RPCErrorCode.parseError, message: "parse error: \(error)"))
        }
    }

    private static func readRequest(_ reader: inout JSONReader) throws(JSONReadError) -> Result<RPCRequest, RPCFailure> {
        var version: JSONValue?, method: JSONValue?, id: String?, idKind: JSONReader.Kind?, params: JSONValue?
        var paramsKind: JSONReader.Kind?
        try reader.readObject { (key, reader) throws(JSONReadError) in
            switch key {
            case "jsonrpc": version = try reader.readValue()
            case "method": method = try reader.readValue()
            case "id":
                idKind = try reader.peekKind()
                id = try reader.readRaw()
            case "params":
                paramsKind = try reader.peekKind()
                params = try reader.readValue()
            default: _ = try reader.readValue()
            }
        }
        let answerId = (idKind == .string || idKind == .number || idKind == .null) ? id ?? "null" : "null"
        func fail(_ message: String) -> Result<RPCRequest, RPCFailure> {
            .failure(RPCFailure(id: answerId, error: invalidRequest(message)))
        }
        guard version == .string("2.0") else { return fail("\"jsonrpc\" must be \"2.0\"") }
        guard case .string(let name)? = method else { return fail("\"method\" must be a string") }
        if let idKind, idKind != .string, idKind != .number, idKind != .null {
            return fail("\"id\" must be a string, a number or null")
        }
        if let paramsKind, paramsKind != .object {
            return .failure(RPCFailure(id: answerId, error: RPCError(
                code: RPCErrorCode.invalidParams, message: "\"params\" must be an object (brokerd takes parameters by name)")))
        }
        return .success(RPCRequest(id: id, method: name, params: params))
    }

    private static func invalidRequest(_ message: String) -> RPCError {
        RPCError(code: RPCErrorCode.invalidRequest, message: "invalid request: \(message)")
    }

    // MARK: Answers (compact, no raw newline)

    public static func success(id: String, resultJSON: [UInt8]) -> [UInt8] {
        // One buffer: a token answer is kilobytes, and each `+` copied it again.
        let head = #"{"jsonrpc":"2.0","id":"#, middle = #","result":"#
        var line: [UInt8] = []
        line.reserveCapacity(head.utf8.count + id.utf8.count + middle.utf8.count + resultJSON.count + 1)
        line.append(contentsOf: head.utf8)
        line.append(contentsOf: id.utf8)
        line.append(contentsOf: middle.utf8)
        line.append(contentsOf: resultJSON)
        line.append(UInt8(ascii: "}"))
        return line
    }

    public static func failure(id: String, error: RPCError) -> [UInt8] {
        Array("{\"jsonrpc\":\"2.0\",\"id\":".utf8) + Array(id.utf8) + Array(",\"error\":".utf8)
            + JSONWriter().bytes(error.json) + [UInt8(ascii: "}")]
    }

    public static func notification(method: String, paramsJSON: [UInt8]) -> [UInt8] {
        Array("{\"jsonrpc\":\"2.0\",\"method\":".utf8) + Array(JSONWriter.quoted(method).utf8)
            + Array(",\"params\":".utf8) + paramsJSON + [UInt8(ascii: "}")]
    }

    public static func request(id: Int, method: String, paramsJSON: [UInt8]) -> [UInt8] {
        Array("{\"jsonrpc\":\"2.0\",\"id\":\(id),\"method\":".utf8) + Array(JSONWriter.quoted(method).utf8)
            + Array(",\"params\":".utf8) + paramsJSON + [UInt8(ascii: "}")]
    }
}
