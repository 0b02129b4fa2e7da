import BrokerJSON
import BrokerProtocol

/// The usual `acquireTokenSilently` request line, read in one pass: the envelope's members checked as
/// `RPCEnvelope.parse` checks them, the params read member by member into `AcquireTokenSilentlyParams`, and every
/// other member validated and skipped, without building a JSON value or running the Codable decoder (the value tree
/// and the decoder were a sixth of a cache hit that no memo serves).
///
/// nil for anything but the plain shape: another method, no id, a member given twice, a params member of another
/// type, a number or raw value where a string is wanted, anything malformed. The caller then parses the line the
/// usual way (`RPCEnvelope.parse`, `ProtocolCoding`), which accepts or refuses it and says why; what this accepts,
/// that parses and decodes to the same request (ProtocolTests' SilentParamsReadingTests).
public struct SilentRequestLine: Sendable {
    /// The id as written (a string with its quotes, a number, or null): what the answer echoes.
    public var id: String
    public var params: AcquireTokenSilentlyParams

    public init?(_ line: [UInt8]) {
        var reader = JSONReader(line)
        var version = false, method = false, id: String?, params: AcquireTokenSilentlyParams?
        do {
            guard try reader.peekKind() == .object else { return nil }
            try reader.readMembers(Self.members) { (index, reader) throws(JSONReadError) in
                switch (index, try reader.peekKind()) {
                // Compared where they lie when written plainly (the usual case), without making a String of each.
                case (0, .string): version = try Self.readString(&reader, is: "2.0")
                case (1, .string): method = try Self.readString(&reader, is: BrokerMethod.acquireTokenSilently.rawValue)
                case (2, .string), (2, .number), (2, .null): id = try reader.readRaw()
                case (3, .object): params = try AcquireTokenSilentlyParams(reading: &reader)
                default: throw notPlain
                }
            }
            try reader.expectEnd()
        } catch {
            return nil
        }
        guard version, method, let id = id.take(), let params = params.take() else { return nil }
        self.id = id
        self.params = params
    }

    private static let members = JSONKeyTable(["jsonrpc", "method", "id", "params"])

    private static func readString(_ reader: inout JSONReader, is expected: String) throws(JSONReadError) -> Bool {
        if reader.readString(ifEqualTo: expected) { return true }
        return try reader.readString() == expected
    }
}

/// Thrown inside a read to leave it: the line is not the plain shape (the caller parses it the usual way).
private let notPlain = JSONReadError(message: "not the plain shape of the request", offset: 0)

extension AcquireTokenSilentlyParams {
    /// The params object at the reader, read member by member; nil (the reader then stands anywhere) for anything
    /// but the plain shape. Members it does not know are skipped, as the decoder ignores them.
    public init?(reading reader: inout JSONReader) throws(JSONReadError) {
        var clientId: String?, authority: String?, scopes: [String]?, resource: String?, account: AccountReference?
        var forceRefresh: Bool?, claims: String?, correlationId: String?
        do {
            try reader.readMembers(Self.members) { (index, reader) throws(JSONReadError) in
                let kind = try reader.peekKind()
                // By the table's index: matching the member's name as a String again cost a tenth of the read.
                switch (index, kind) {
                case (0, .string): clientId = try reader.readString()
                case (1, _): authority = try Self.optionalString(kind, &reader)
                case (2, _): resource = try Self.optionalString(kind, &reader)
                case (3, _): claims = try Self.optionalString(kind, &reader)
                case (4, _): correlationId = try Self.optionalString(kind, &reader)
                case (5, .null): try reader.skipValue()
                case (5, .bool): forceRefresh = try reader.readValue() == .bool(true)
                case (6, .array):
                    var list: [String] = []
                    try reader.readArray { (reader) throws(JSONReadError) in
                        guard try reader.peekKind() == .string else { throw notPlain }
                        list.append(try reader.readString())
                    }
                    scopes = list
                case (7, _): account = try AccountReference(reading: &reader, kind: kind)
                default: throw notPlain
                }
            }
        } catch let error where error == notPlain || error == JSONReader.repeatedMember {
            return nil
        }
        // Moved out of the variables the reader filled (`take`), not copied: a copy retained every string of the
        // request once more, and the variables released them again.
        guard let clientId = clientId.take(), let scopes = scopes.take(), let account = account.take() else { return nil }
        self.init(clientId: clientId, authority: authority.take(), scopes: scopes, account: account,
                  forceRefresh: forceRefresh, claims: claims.take(), correlationId: correlationId.take(),
                  resource: resource.take())
    }

    /// In the order the switch above numbers them.
    private static let members = JSONKeyTable(["clientId", "authority", "resource", "claims", "correlationId",
                                               "forceRefresh", "scopes", "account"])

    private static func optionalString(_ kind: JSONReader.Kind, _ reader: inout JSONReader) throws(JSONReadError) -> String? {
        switch kind {
        case .null:
            try reader.skipValue()
            return nil
        case .string: return try reader.readString()
        default: throw notPlain
        }
    }
}

extension AccountReference {
    private static let accountMembers = JSONKeyTable(["homeAccountId", "username"])

    /// A bare string, or an object with homeAccountId and/or username as strings (or null); anything else is not
    /// the plain shape.
    init(reading reader: inout JSONReader, kind: JSONReader.Kind) throws(JSONReadError) {
        switch kind {
        case .string:
            self.init(try reader.readString())
        case .object:
            var homeAccountId: String?, username: String?
            try reader.readMembers(Self.accountMembers) { (index, reader) throws(JSONReadError) in
                switch try reader.peekKind() {
                case .null: try reader.skipValue()
                case .string:
                    let text = try reader.readString()
                    if index == 0 { homeAccountId = text } else { username = text }
                default: throw notPlain
                }
            }
            guard homeAccountId != nil || username != nil else { throw notPlain }
            self.init(homeAccountId: homeAccountId.take(), username: username.take())
        default:
            throw notPlain
        }
    }
}
