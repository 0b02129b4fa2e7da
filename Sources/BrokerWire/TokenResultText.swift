import BrokerJSON
import BrokerProtocol

/// A token result's JSON text with its correlation id left open: the answer to a request that repeats an earlier
/// one is this text with the new request's correlation id put in, byte for byte what encoding the whole result
/// with that id gives (`ProtocolCoding.encode`), without encoding it again.
///
/// Keys are sorted, so `correlationId` has one fixed place: the text is kept as the part before it and the part
/// after it, each with the answer line's envelope around it, so that an answer line is five pieces that can be
/// written as they lie (`withAnswerLinePieces`).
public struct TokenResultText: Sendable {
    private static let envelopeStart: StaticString = #"{"jsonrpc":"2.0","id":"#
    private static let resultKey = Array(#","result":"#.utf8)
    private static let envelopeEnd = Array("}\n".utf8)

    private let head: [UInt8]  // `,"result":` "{" and the members before correlationId
    private let tail: [UInt8]  // the members after it, "}" and the envelope's "}" and newline
    private static let resultKeyCount = 10, envelopeEndCount = 2
    private var hasBefore: Bool { head.count > Self.resultKeyCount + 1 }
    private var hasAfter: Bool { tail.count > Self.envelopeEndCount + 1 }

    public init(_ result: TokenResult) throws {
        var head = Self.resultKey
        head.reserveCapacity(result.accessToken.utf8.count + (result.idToken?.utf8.count ?? 0) + 2048)
        head.append(UInt8(ascii: "{"))
        try TokenResultWriter.membersBeforeCorrelationId(result, into: &head)
        var tail: [UInt8] = []
        tail.reserveCapacity((result.idToken?.utf8.count ?? 0) + 256)
        TokenResultWriter.membersAfterCorrelationId(result, into: &tail)
        tail.append(UInt8(ascii: "}"))
        tail += Self.envelopeEnd
        self.head = head
        self.tail = tail
    }

    /// The text of a token result whose account is already written (`accountJSON(_:)`): what a cache hit makes, the
    /// account's text kept with the account (it changes when the account does, not per token).
    public init(accessToken: String, tokenType: String, expiresOn: Int64, extendedExpiresOn: Int64, refreshOn: Int64?,
                grantedScopes: [String], idToken: String?, accountJSON: [UInt8], authority: String, source: String) {
        // The members after the correlation id are those of any result with these fields.
        let rest = TokenResult(accessToken: "", tokenType: tokenType, expiresOn: expiresOn, extendedExpiresOn: extendedExpiresOn,
                               refreshOn: refreshOn, grantedScopes: grantedScopes, idToken: idToken,
                               account: Self.noAccount, authority: "", correlationId: nil, source: source)
        var head = Self.resultKey
        head.reserveCapacity(accessToken.utf8.count + accountJSON.count + 256)
        head.append(UInt8(ascii: "{"))
        TokenResultWriter.membersBeforeCorrelationId(accessToken: accessToken, accountJSON: accountJSON, authority: authority,
                                                     into: &head)
        var tail: [UInt8] = []
        tail.reserveCapacity((idToken?.utf8.count ?? 0) + 256)
        TokenResultWriter.membersAfterCorrelationId(rest, into: &tail)
        tail.append(UInt8(ascii: "}"))
        tail += Self.envelopeEnd
        self.head = head
        self.tail = tail
    }

    /// An account as a token result's `account` member writes it.
    public static func accountJSON(_ account: Account) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        try TokenResultWriter.account(account, into: &out)
        return out
    }

    private static let noAccount = Account(homeAccountId: "", username: "", environment: "", realm: "", localAccountId: nil,
                                           name: nil, authorityType: nil, tenantProfiles: [], apps: [], hiddenFrom: [],
                                           signInRequired: false)

    public func json(correlationId: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(head.count + tail.count + (correlationId?.utf8.count ?? 0) + 20)
        out += head[Self.resultKeyCount...]
        if let member = correlationIdMember(correlationId) { out += member } else if hasBefore && hasAfter { out.append(UInt8(ascii: ",")) }
        out += tail[..<(tail.count - Self.envelopeEndCount)]
        return out
    }

    /// The whole answer line (without its newline): what `RPCEnvelope.success` makes of `json(correlationId:)`.
    public func answerLine(id: String, correlationId: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(answerLineCapacity(id: id, correlationId: correlationId))
        withAnswerLinePieces(id: id, correlationId: correlationId) { pieces in
            for piece in pieces { out += piece }
        }
        out.removeLast()
        return out
    }

    /// Room for the answer line and its newline (a correlation id with escapes may need more: the buffer grows).
    public func answerLineCapacity(id: String, correlationId: String?) -> Int {
        head.count + tail.count + (correlationId?.utf8.count ?? 0) + id.utf8.count + 64
    }

    /// The answer line and its newline as the pieces it is made of (the envelope's start, the id, the result up to
    /// the correlation id, the correlation id member or a comma or nothing, the rest), valid during `body`: a
    /// connection writes them with one gathering write, so the answer is never copied in user space. No allocation
    /// unless there is a correlation id.
    public func withAnswerLinePieces(id: String, correlationId: String?,
                                     _ body: (UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Void) {
        var id = id
        let member = correlationIdMember(correlationId)
        let comma: StaticString = ","
        id.withUTF8 { idBytes in
            head.withUnsafeBytes { headBytes in
                tail.withUnsafeBytes { tailBytes in
                    (member ?? []).withUnsafeBytes { memberBytes in
                        withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer.self, capacity: 5) { pieces in
                            pieces[0] = UnsafeRawBufferPointer(start: Self.envelopeStart.utf8Start,
                                                               count: Self.envelopeStart.utf8CodeUnitCount)
                            pieces[1] = UnsafeRawBufferPointer(idBytes)
                            pieces[2] = headBytes
                            if member != nil {
                                pieces[3] = memberBytes
                            } else {
                                pieces[3] = UnsafeRawBufferPointer(start: comma.utf8Start, count: hasBefore && hasAfter ? 1 : 0)
                            }
                            pieces[4] = tailBytes
                            body(UnsafeBufferPointer(pieces))
                        }
                    }
                }
            }
        }
    }

    /// `"correlationId":"…"` with the commas it needs on either side; nil for no correlation id.
    private func correlationIdMember(_ correlationId: String?) -> [UInt8]? {
        guard let correlationId else { return nil }
        var member: [UInt8] = []
        if hasBefore { member.append(UInt8(ascii: ",")) }
        member += #""correlationId":"#.utf8
        JSONWriter.writeWireString(correlationId, into: &member)
        if hasAfter { member.append(UInt8(ascii: ",")) }
        return member
    }
}
