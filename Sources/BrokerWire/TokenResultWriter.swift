import BrokerJSON
import BrokerProtocol

/// A token result written straight to bytes: the bytes `ProtocolCoding.encode` gives (keys sorted, nil members left
/// out), without building the value tree the Codable encoder builds. Every cache hit that no memo serves writes one,
/// and through the encoder that was a fifth of the hit. Tests hold it to the encoder's bytes (TokenResultTextTests).
enum TokenResultWriter {
    /// The members before `correlationId` in key order (accessToken, account, authority), each preceded by a comma
    /// except the first; then those after it (expiresOn … tokenType).
    static func membersBeforeCorrelationId(_ result: TokenResult, into out: inout [UInt8]) throws {
        var accountText: [UInt8] = []
        try account(result.account, into: &accountText)
        membersBeforeCorrelationId(accessToken: result.accessToken, accountJSON: accountText, authority: result.authority,
                                   into: &out)
    }

    /// The same, with the account already written (`account(_:into:)`).
    static func membersBeforeCorrelationId(accessToken: String, accountJSON: [UInt8], authority: String,
                                           into out: inout [UInt8]) {
        var first = true
        string("\"accessToken\":", accessToken, &first, &out)
        key("\"account\":", &first, &out)
        out.append(contentsOf: accountJSON)
        string("\"authority\":", authority, &first, &out)
    }

    static func membersAfterCorrelationId(_ result: TokenResult, into out: inout [UInt8]) {
        _ = membersAfterCorrelationId(result, leavingOutIdToken: false, into: &out)
    }

    /// The same, with the access token's text left out, for the caller to put in as it lies (it needs no escape):
    /// the offset in `out` where it goes, between its quotes.
    static func membersBeforeCorrelationId(leavingOutAccessToken accountJSON: [UInt8], authority: String,
                                           into out: inout [UInt8]) -> Int {
        var first = true
        key("\"accessToken\":", &first, &out)
        out.append(UInt8(ascii: "\""))
        let offset = out.count
        out.append(UInt8(ascii: "\""))
        key("\"account\":", &first, &out)
        out.append(contentsOf: accountJSON)
        string("\"authority\":", authority, &first, &out)
        return offset
    }

    /// The members after `correlationId`; with `leavingOutIdToken`, without the id token's text (as for the access
    /// token above): the offset where it goes, or nil when there is no id token.
    static func membersAfterCorrelationId(_ result: TokenResult, leavingOutIdToken: Bool, into out: inout [UInt8]) -> Int? {
        membersAfterCorrelationId(expiresOn: result.expiresOn, extendedExpiresOn: result.extendedExpiresOn,
                                  refreshOn: result.refreshOn, grantedScopes: result.grantedScopes, idToken: result.idToken,
                                  source: result.source, tokenType: result.tokenType, leavingOutIdToken: leavingOutIdToken,
                                  into: &out)
    }

    /// The same from the fields themselves: what a cache hit has (a token result made to hand them over copied and
    /// released every field of an empty account besides).
    static func membersAfterCorrelationId(expiresOn: Int64, extendedExpiresOn: Int64, refreshOn: Int64?, grantedScopes: [String],
                                          idToken: String?, source: String, tokenType: String, leavingOutIdToken: Bool,
                                          into out: inout [UInt8]) -> Int? {
        var first = true
        number("\"expiresOn\":", expiresOn, &first, &out)
        number("\"extendedExpiresOn\":", extendedExpiresOn, &first, &out)
        key("\"grantedScopes\":", &first, &out)
        strings(grantedScopes, &out)
        var offset: Int?
        if let idToken {
            if leavingOutIdToken {
                key("\"idToken\":", &first, &out)
                out.append(UInt8(ascii: "\""))
                offset = out.count
                out.append(UInt8(ascii: "\""))
            } else {
                string("\"idToken\":", idToken, &first, &out)
            }
        }
        if let refreshOn { number("\"refreshOn\":", refreshOn, &first, &out) }
        string("\"source\":", source, &first, &out)
        string("\"tokenType\":", tokenType, &first, &out)
        return offset
    }

    /// `claimsText`: the claims already in canonical wire text (`JWTPayload.canonicalClaims`), written in place of
    /// `account.accountClaims`.
    static func account(_ account: Account, claimsText: [UInt8]? = nil, into out: inout [UInt8]) throws {
        var first = true
        out.append(UInt8(ascii: "{"))
        if let claimsText {
            key("\"accountClaims\":", &first, &out)
            out.append(contentsOf: claimsText)
        } else if let claims = account.accountClaims {
            key("\"accountClaims\":", &first, &out)
            // Claims are whatever the id_token held: the encoder's canonical form (sorted, numbers normalised).
            try JSONWriter.writeCanonicalWire(claims, into: &out)
        }
        key("\"apps\":", &first, &out)
        out.append(UInt8(ascii: "["))
        for (index, app) in account.apps.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            var inner = true
            out.append(UInt8(ascii: "{"))
            key("\"accessTokens\":", &inner, &out)
            out.append(UInt8(ascii: "["))
            for (index, token) in app.accessTokens.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                var innermost = true
                out.append(UInt8(ascii: "{"))
                if let expiresOn = token.expiresOn { number("\"expiresOn\":", expiresOn, &innermost, &out) }
                if let realm = token.realm { string("\"realm\":", realm, &innermost, &out) }
                key("\"scopes\":", &innermost, &out)
                strings(token.scopes, &out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
            string("\"clientId\":", app.clientId, &inner, &out)
            if let familyId = app.familyId { string("\"familyId\":", familyId, &inner, &out) }
            key("\"hasRefreshToken\":", &inner, &out)
            out.append(contentsOf: (app.hasRefreshToken ? "true" : "false").utf8)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        if let authorityType = account.authorityType { string("\"authorityType\":", authorityType, &first, &out) }
        string("\"environment\":", account.environment, &first, &out)
        key("\"hiddenFrom\":", &first, &out)
        strings(account.hiddenFrom, &out)
        string("\"homeAccountId\":", account.homeAccountId, &first, &out)
        if let localAccountId = account.localAccountId { string("\"localAccountId\":", localAccountId, &first, &out) }
        if let name = account.name { string("\"name\":", name, &first, &out) }
        string("\"realm\":", account.realm, &first, &out)
        key("\"signInRequired\":", &first, &out)
        out.append(contentsOf: (account.signInRequired ? "true" : "false").utf8)
        key("\"tenantProfiles\":", &first, &out)
        out.append(UInt8(ascii: "["))
        for (index, profile) in account.tenantProfiles.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            var inner = true
            out.append(UInt8(ascii: "{"))
            string("\"environment\":", profile.environment, &inner, &out)
            if let localAccountId = profile.localAccountId { string("\"localAccountId\":", localAccountId, &inner, &out) }
            string("\"realm\":", profile.realm, &inner, &out)
            if let username = profile.username { string("\"username\":", username, &inner, &out) }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        string("\"username\":", account.username, &first, &out)
        out.append(UInt8(ascii: "}"))
    }

    // MARK: Pieces

    // A cache hit writes its members through these: they append bytes, and make no String (a number's `String(_:)`
    // and a String's UTF-8 view appended were a third of writing the members after the correlation id).
    /// The member's key, `quotedName` being the key as written, quotes and colon included (`"name":`), so that
    /// it is appended in one piece: a key appended byte by byte, each append checking the array's room and
    /// uniqueness, cost more than a hit's two numbers and four strings together.
    private static func key(_ quotedName: StaticString, _ first: inout Bool, _ out: inout [UInt8]) {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
        out.append(contentsOf: UnsafeBufferPointer(start: quotedName.utf8Start, count: quotedName.utf8CodeUnitCount))
    }

    private static func string(_ name: StaticString, _ value: String, _ first: inout Bool, _ out: inout [UInt8]) {
        key(name, &first, &out)
        JSONWriter.writeWireString(value, into: &out)
    }

    private static func number(_ name: StaticString, _ value: Int64, _ first: inout Bool, _ out: inout [UInt8]) {
        key(name, &first, &out)
        JSONWriter.writeInteger(value, into: &out)
    }

    private static func strings(_ values: [String], _ out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONWriter.writeWireString(value, into: &out)
        }
        out.append(UInt8(ascii: "]"))
    }
}
