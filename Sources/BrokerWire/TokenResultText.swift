import BrokerJSON
import BrokerProtocol

/// A token result's JSON text with its correlation id left open: the answer to a request that repeats an earlier
/// one is this text with the new request's correlation id put in, byte for byte what encoding the whole result
/// with that id gives (`ProtocolCoding.encode`), without encoding it again.
///
/// Keys are sorted, so `correlationId` has one fixed place: the text is kept with that place marked, and the
/// answer line's envelope around it, so that an answer line is a few pieces that can be written as they lie
/// (`withAnswerLinePieces`). A cache hit's tokens, which need no escape, are not copied into the text either: they
/// are pieces of their own, the strings the cache holds, and the text is a few hundred bytes, not a few kilobytes.
public struct TokenResultText: Sendable {
    private static let envelopeStart: StaticString = #"{"jsonrpc":"2.0","id":"#
    private static let resultKey = Array(#","result":"#.utf8)
    private static let envelopeEnd = Array("}\n".utf8)

    /// `,"result":` "{" and the members, "}", and the envelope's "}" and newline, without the correlation id's
    /// member, which goes at `correlationIdAt`. When the tokens are kept apart, their text goes at `accessTokenAt`
    /// and `idTokenAt`; otherwise the text holds them, the two are "" and both offsets are `correlationIdAt`.
    private let text: [UInt8]
    private let accessToken: String, idToken: String
    private let accessTokenAt: Int, correlationIdAt: Int, idTokenAt: Int
    private static let resultKeyCount = 10, envelopeEndCount = 2
    private var hasBefore: Bool { correlationIdAt + accessToken.utf8.count > Self.resultKeyCount + 1 }
    private var hasAfter: Bool { text.count - correlationIdAt + idToken.utf8.count > Self.envelopeEndCount + 1 }

    public init(_ result: TokenResult) throws {
        var text = Self.resultKey
        text.reserveCapacity(result.accessToken.utf8.count + (result.idToken?.utf8.count ?? 0) + 2048)
        text.append(UInt8(ascii: "{"))
        try TokenResultWriter.membersBeforeCorrelationId(result, into: &text)
        let correlationIdAt = text.count
        TokenResultWriter.membersAfterCorrelationId(result, into: &text)
        text.append(UInt8(ascii: "}"))
        text += Self.envelopeEnd
        self.text = text
        (accessToken, idToken) = ("", "")
        (accessTokenAt, self.correlationIdAt, idTokenAt) = (correlationIdAt, correlationIdAt, correlationIdAt)
    }

    /// The text of a token result whose account is already written (`accountJSON(_:)`): what a cache hit makes, the
    /// account's text kept with the account (it changes when the account does, not per token).
    /// `tokensNeedNoEscape`: neither token has a byte that JSON escapes (the cache checks when it stores them), so
    /// both are kept apart, as they are.
    public init(accessToken: String, tokenType: String, expiresOn: Int64, extendedExpiresOn: Int64, refreshOn: Int64?,
                grantedScopes: [String], idToken: String?, accountJSON: [UInt8], authority: String, source: String,
                tokensNeedNoEscape: Bool = false) {
        let apart = tokensNeedNoEscape
        // Room for all of it at once (the keys, three numbers and the short strings fit in 384 bytes), in a new
        // array: one made from the shared `resultKey` was copied again at its first append, on every hit.
        var text: [UInt8] = []
        text.reserveCapacity(accountJSON.count + authority.utf8.count + 384
                             + grantedScopes.reduce(0) { $0 + $1.utf8.count + 3 } + source.utf8.count + tokenType.utf8.count
                             + (apart ? 0 : accessToken.utf8.count + (idToken?.utf8.count ?? 0)))
        text.append(contentsOf: Self.resultKey)
        text.append(UInt8(ascii: "{"))
        var accessTokenAt: Int?
        if apart {
            accessTokenAt = TokenResultWriter.membersBeforeCorrelationId(leavingOutAccessToken: accountJSON,
                                                                         authority: authority, into: &text)
        } else {
            TokenResultWriter.membersBeforeCorrelationId(accessToken: accessToken, accountJSON: accountJSON,
                                                         authority: authority, into: &text)
        }
        let correlationIdAt = text.count
        let idTokenAt = TokenResultWriter.membersAfterCorrelationId(
            expiresOn: expiresOn, extendedExpiresOn: extendedExpiresOn, refreshOn: refreshOn, grantedScopes: grantedScopes,
            idToken: idToken, source: source, tokenType: tokenType, leavingOutIdToken: apart, into: &text)
        text.append(UInt8(ascii: "}"))
        text += Self.envelopeEnd
        self.text = text
        self.accessToken = apart ? accessToken : ""
        self.idToken = apart ? idToken ?? "" : ""
        self.accessTokenAt = accessTokenAt ?? correlationIdAt
        self.correlationIdAt = correlationIdAt
        self.idTokenAt = idTokenAt ?? correlationIdAt
    }

    /// An account as a token result's `account` member writes it; `claimsText`, when given, is its `accountClaims`
    /// already in canonical wire text (and `account.accountClaims` is not read).
    public static func accountJSON(_ account: Account, claimsText: [UInt8]? = nil) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024 + (claimsText?.count ?? 0))
        try TokenResultWriter.account(account, claimsText: claimsText, into: &out)
        return out
    }

    public func json(correlationId: String?) -> [UInt8] {
        // The answer line less the envelope around the result: its start, the id, `,"result":` and its last "}".
        let line = answerLine(id: "0", correlationId: correlationId)
        return Array(line[(Self.envelopeStart.utf8CodeUnitCount + 1 + Self.resultKeyCount)..<(line.count - 1)])
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
        text.count + accessToken.utf8.count + idToken.utf8.count + (correlationId?.utf8.count ?? 0) + id.utf8.count + 64
    }

    /// The answer line and its newline as the pieces it is made of (the envelope's start, the id, the result up to
    /// the correlation id with the access token between, the correlation id member or a comma or nothing, the rest
    /// with the id token between), valid during `body`: a connection writes them with one gathering write, so the
    /// answer is never copied in user space. No allocation unless there is a correlation id.
    public func withAnswerLinePieces(id: String, correlationId: String?,
                                     _ body: (UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Void) {
        var id = id, accessToken = accessToken, idToken = idToken
        let member = correlationIdMember(correlationId)
        let comma: StaticString = ","
        id.withUTF8 { idBytes in
            accessToken.withUTF8 { accessTokenBytes in
                idToken.withUTF8 { idTokenBytes in
                    text.withUnsafeBytes { textBytes in
                        (member ?? []).withUnsafeBytes { memberBytes in
                            withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer.self, capacity: 9) { pieces in
                                pieces[0] = UnsafeRawBufferPointer(start: Self.envelopeStart.utf8Start,
                                                                   count: Self.envelopeStart.utf8CodeUnitCount)
                                pieces[1] = UnsafeRawBufferPointer(idBytes)
                                pieces[2] = UnsafeRawBufferPointer(rebasing: textBytes[..<accessTokenAt])
                                pieces[3] = UnsafeRawBufferPointer(accessTokenBytes)
                                pieces[4] = UnsafeRawBufferPointer(rebasing: textBytes[accessTokenAt..<correlationIdAt])
                                pieces[5] = member != nil ? memberBytes
                                    : UnsafeRawBufferPointer(start: comma.utf8Start, count: hasBefore && hasAfter ? 1 : 0)
                                pieces[6] = UnsafeRawBufferPointer(rebasing: textBytes[correlationIdAt..<idTokenAt])
                                pieces[7] = UnsafeRawBufferPointer(idTokenBytes)
                                pieces[8] = UnsafeRawBufferPointer(rebasing: textBytes[idTokenAt...])
                                body(UnsafeBufferPointer(pieces))
                            }
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
