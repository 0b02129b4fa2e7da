import BrokerJSON

/// A request argument the front end will not pass on, and why (the text goes to the caller and the log: it names
/// keys and limits, never a value).
struct Broker1RequestProblem: Error, Equatable {
    var reason: String
}

/// The checks a request passes before it reaches the broker: bad input on the bus gets the same care as on the
/// socket, a clear error naming the problem instead of a guess (a `clientId` of the wrong type must not read as "all
/// apps"). Only what a method reads is checked: clients send many keys brokerd ignores (`requestOptions`,
/// `uxContextHandle`, `onboardingBlob`…), and those stay free.
enum Broker1Requests {
    /// The socket API's message limit: a request is a few kilobytes; a megabyte is a bug or an attack.
    static let maximumRequestBytes = 1 << 20
    /// A correlation id is a UUID; brokerd echoes it in token answers, so it is bounded too.
    static let maximumCorrelationIdBytes = 1_024

    /// The request object of `method`, or what is wrong with it.
    static func validated(method: String, correlationId: String, request: String) -> Result<JSONObject, Broker1RequestProblem> {
        guard request.utf8.count <= maximumRequestBytes else {
            return .failure(.init(reason: "the request (argument 3) is larger than \(maximumRequestBytes) bytes"))
        }
        guard correlationId.utf8.count <= maximumCorrelationIdBytes else {
            return .failure(.init(reason: "the correlation id (argument 2) is longer than \(maximumCorrelationIdBytes) bytes"))
        }
        // Neither reads its request: pymsalruntime's cancel carries an error object, version requests vary by client.
        if method == "getLinuxBrokerVersion" || method == "cancelInteractiveFlow" { return .success(JSONObject()) }
        let parsed: JSONValue
        do { parsed = try JSONReader.parse(request) } catch {
            return .failure(.init(reason: "the request (argument 3) is not valid JSON: \(error)"))
        }
        guard let params = parsed.objectValue else {
            return .failure(.init(reason: "the request (argument 3) must be a JSON object"))
        }
        let problem: String? = switch method {
        case "acquireTokenSilently", "acquireTokenInteractively": tokenRequestProblem(params)
        case "getAccounts": clientIdProblem(params, at: "")
        case "removeAccount": clientIdProblem(params, at: "") ?? typeProblem(params, "account", .object, at: "")
        default: nil
        }
        return problem.map { .failure(.init(reason: $0)) } ?? .success(params)
    }

    /// `authParameters` with the keys the token methods read, each of its type when present.
    private static func tokenRequestProblem(_ params: JSONObject) -> String? {
        guard let value = params["authParameters"] else { return "authParameters is missing" }
        guard let auth = value.objectValue else { return "authParameters must be a JSON object" }
        if let problem = clientIdProblem(auth, at: "authParameters.") { return problem }
        for key in ["authority", "username", "decodedClaims"] {
            if let problem = typeProblem(auth, key, .string, at: "authParameters.") { return problem }
        }
        if let problem = typeProblem(auth, "account", .object, at: "authParameters.") { return problem }
        if let account = auth["account"]?.objectValue,
           let problem = typeProblem(account, "homeAccountId", .string, at: "authParameters.account.") {
            return problem
        }
        if let scopes = auth["requestedScopes"], !isNull(scopes) {
            guard let list = scopes.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                return "authParameters.requestedScopes must be an array of strings"
            }
        }
        return nil
    }

    private static func clientIdProblem(_ object: JSONObject, at path: String) -> String? {
        guard let value = object["clientId"] else { return "\(path)clientId is missing" }
        guard let clientId = value.stringValue, !clientId.isEmpty else { return "\(path)clientId must be a non-empty string" }
        return nil
    }

    private enum Kind: String {
        case string, object
    }

    /// A key that is present must have its type; null stands for absent (clients send `"account": null`).
    private static func typeProblem(_ object: JSONObject, _ key: String, _ kind: Kind, at path: String) -> String? {
        guard let value = object[key], !isNull(value) else { return nil }
        let matches = switch kind {
        case .string: value.stringValue != nil
        case .object: value.objectValue != nil
        }
        return matches ? nil : "\(path)\(key) must be a JSON \(kind.rawValue)"
    }

    private static func isNull(_ value: JSONValue) -> Bool {
        if case .null = value { return true }
        return false
    }
}

/// What a silent request for a named account says, as the cache hit reads it (`Broker1Methods.cachedAnswer`).
struct PlainSilentRequest: Equatable {
    var clientId: String
    /// nil when absent, null or empty.
    var authority: String?
    var scopes: [String]
    var homeAccountId: String
}

extension Broker1Requests {
    /// The members a cache hit needs of an `acquireTokenSilently` request, each checked as `validated` checks it, with
    /// every other member validated and skipped: pymsalruntime sends some thirty members, and building them all was
    /// a fifth of a varied hit. nil for anything `validated` refuses and for anything but a plain request for a named
    /// account (no account, claims, a member of interest given twice): the full path then reads the request, and
    /// says what is wrong with it. What this accepts, `validated` accepts with the same values (Broker1RequestsTests).
    /// `request`: its bytes as the bus gave them (UTF-8, which sd-bus checked as it read the string).
    static func plainSilent(correlationId: String, request: [UInt8]) -> PlainSilentRequest? {
        guard request.count <= maximumRequestBytes, correlationId.utf8.count <= maximumCorrelationIdBytes else { return nil }
        var reader = JSONReader(request)
        var found: PlainSilentRequest??
        do {
            guard try reader.peekKind() == .object else { return nil }
            try reader.readMembers(requestMembers) { (_, reader) throws(JSONReadError) in
                found = .some(try readAuthParameters(&reader))
            }
            try reader.expectEnd()
        } catch {
            return nil
        }
        return found ?? nil
    }

    private enum PlainSilentReading {
        static let notPlain = JSONReadError(message: "not a plain silent request", offset: 0)
    }

    private static let authMembers = JSONKeyTable(["clientId", "authority", "username", "decodedClaims", "requestedScopes",
                                                   "account"])
    private static let requestMembers = JSONKeyTable(["authParameters"])
    private static let accountMembers = JSONKeyTable(["homeAccountId"])

    private static func readAuthParameters(_ reader: inout JSONReader) throws(JSONReadError) -> PlainSilentRequest? {
        guard try reader.peekKind() == .object else { throw PlainSilentReading.notPlain }
        var clientId: String?, authority: String?, scopes: [String]?, homeAccountId: String?
        try reader.readMembers(authMembers) { (index, reader) throws(JSONReadError) in
            // By the table's index (in `authMembers`' order): the table has matched the name already, and matching
            // it as a String again compared it with each case's name in turn.
            switch (index, try reader.peekKind()) {
            case (0, .string): clientId = try reader.readString()
            case (1, .string): authority = try reader.readString()
            case (2, .string), (_, .null): try reader.skipValue()
            case (3, .string):
                guard try reader.readString().isEmpty else { throw PlainSilentReading.notPlain }  // claims: the full path
            case (4, .array):
                var list: [String] = []
                try reader.readArray { (reader) throws(JSONReadError) in
                    guard try reader.peekKind() == .string else { throw PlainSilentReading.notPlain }
                    list.append(try reader.readString())
                }
                scopes = list
            case (5, .object):
                try reader.readMembers(accountMembers) { (_, reader) throws(JSONReadError) in
                    switch try reader.peekKind() {
                    case .string: homeAccountId = try reader.readString()
                    case .null: try reader.skipValue()
                    default: throw PlainSilentReading.notPlain
                    }
                }
            default:
                throw PlainSilentReading.notPlain
            }
        }
        guard let clientId, !clientId.isEmpty, let homeAccountId, !homeAccountId.isEmpty else { return nil }
        return PlainSilentRequest(clientId: clientId, authority: authority.flatMap { $0.isEmpty ? nil : $0 },
                                  scopes: scopes ?? [], homeAccountId: homeAccountId)
    }
}
