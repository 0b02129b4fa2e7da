import BrokerCache
import BrokerCore
import BrokerJSON

#if canImport(Glibc)
import Glibc
#endif

/// The status numbers of a token error as libmsalruntime reads them (its internal enum, not pymsalruntime's
/// Response_Status). 12 reads as "no error" and 23 makes the client retry forever: neither is ever sent.
enum Broker1Status: Int {
    case unexpected = 0
    /// brokerd's app policy refused the app (`Broker1Methods.refusal`): not 2 or 13, which make msal-python start an
    /// interactive sign-in, nor 23, which makes libmsalruntime retry for ever.
    case interactionRequired = 2
    case serverTemporarilyUnavailable = 5
    case apiContractViolation = 6
    case userCanceled = 7
    case incorrectConfiguration = 9
    case authorityUntrusted = 11
    case deviceNotRegistered = 17
}

extension Broker1Methods {
    /// `authorizationType` 1, the account from `authParameters.account`; `account: null` (a silent sign-in) means
    /// the default account: the only one the client sees, else InteractionRequired.
    func silentToken(_ params: JSONObject, correlationId: String, caller: CallerIdentity) async -> JSONValue {
        guard let auth = params["authParameters"]?.objectValue, let clientId = auth["clientId"]?.stringValue,
              !clientId.isEmpty else {
            return Self.tokenError(status: .apiContractViolation, tag: 0x6272_0010, context: "authParameters.clientId is missing")
        }
        var account: (homeAccountId: String?, username: String?)? = nil
        if let hid = auth["account"]?.objectValue?["homeAccountId"]?.stringValue, !hid.isEmpty {
            account = (hid, await broker.accountSummary(homeAccountId: hid)?.username)
        } else if case .allow = apps.decide(caller, clientId: clientId, account: nil, scopes: []) {
            // The default account is chosen among those the app may see; an app the policy asks about is asked first
            // (below), and its account chosen then.
            switch await defaultAccount(clientId, caller: caller) {
            case .success(let chosen): account = chosen
            case .failure(let error): return error.answer
            }
        }
        let requested = auth["requestedScopes"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let scopes = Scopes.requested(requested)
        if case .failure(let refusal) = await apps.authorize(caller, frontEnd: "dbus", clientId: clientId, account: account,
                                                             scopes: scopes) {
            return Self.refusal(refusal)
        }
        if account == nil {
            switch await defaultAccount(clientId, caller: caller) {
            case .success(let chosen): account = chosen
            case .failure(let error): return error.answer
            }
        }
        guard let hid = account?.homeAccountId else {
            return Self.tokenError(status: .unexpected, tag: 0x6272_0014, context: "no account chosen")
        }
        let selector = AccountSelector.homeAccountId(hid)
        let request = SilentTokenRequest(
            clientId: clientId, authority: auth["authority"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 },
            scopes: requested, account: selector, claims: auth["decodedClaims"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 })
        do {
            let outcome = try await broker.acquireTokenSilently(request)
            record(outcome, caller: caller, clientId: clientId, scopes: scopes, account: account)
            return Self.tokenResponse(outcome, correlationId: correlationId)
        } catch {
            apps.record(caller, frontEnd: "dbus", clientId: clientId, scopes: scopes, homeAccountId: account?.homeAccountId,
                        username: account?.username, outcome: error.auditWord)
            return Self.tokenError(error)
        }
    }

    /// A silent request for a named account that the cache answers and the app policy allows as it stands, answered
    /// where the call arrived (the bus thread) without a task or an actor: the answer `silentToken` gives for it, and
    /// what the front end keeps of it for the caller's next identical request (`answerAgain`), and what the audit
    /// records of it (the front end counts it: `HitAudit`).
    /// nil for anything else (another method, a malformed request, the default account, claims, a refresh due, a
    /// question for the user, a refusal), which then takes `answer`.
    /// `request` and the answer are UTF-8 bytes, as the bus carries them: the request is read where it lies, and the
    /// answer sent as written, where a String of each was made and its UTF-8 checked once more.
    /// `access`: what the caller's earlier calls learned of the app policy (`AccessMemo`).
    public func cachedAnswer(method: String, correlationId: String, request: [UInt8], caller: CallerIdentity,
                             access: inout AccessMemo)
        -> (answer: [UInt8], remembered: RememberedBusAnswer?, subject: HitAudit.Subject)? {
        guard method == "acquireTokenSilently",
              let plain = Broker1Requests.plainSilent(correlationId: correlationId, request: request) else { return nil }
        let (clientId, hid, requested) = (plain.clientId, plain.homeAccountId, plain.scopes)
        let silent = SilentTokenRequest(clientId: clientId, authority: plain.authority, scopes: requested,
                                        account: .homeAccountId(hid))
        let generation = apps.generation
        guard let hit = broker.cachedSilentToken(silent) else { return nil }
        let scopes = hit.requestedScopes, account = (homeAccountId: Optional(hid), username: Optional(hit.username))
        guard access.allows(caller, clientId: clientId, account: account, scopes: scopes, in: apps) else { return nil }
        let subject = HitAudit.Subject(clientId: clientId, homeAccountId: hit.outcome.homeAccountId, username: hit.username,
                                       scopes: scopes)
        logger.debug("D-Bus request answered from the cache", metadata: [
            "method": "\(method)", "client_pid": "\(caller.pid)", "client_exe": "\(caller.executable ?? "?")", "app": "\(caller.app)",
        ])
        guard var text = Self.tokenResponseHead(hit.outcome, preferredUsername: hit.idTokenUsername,
                                                tokensNeedNoEscape: hit.tokensNeedNoEscape) else {
            return (Array(JSONWriter().string(Self.tokenResponse(hit.outcome, correlationId: correlationId)).utf8), nil, subject)
        }
        // The answer is finished where its head was written, and kept whole: the next answer copies its head.
        let headCount = text.count
        Self.finishTokenResponse(&text, correlationId: correlationId)
        let remembered = RememberedBusAnswer(method: method, request: request, given: text, headCount: headCount,
                                             freshness: hit.freshness, accessGeneration: generation, subject: subject)
        return (text, remembered, subject)
    }

    /// The answer kept from a cache hit, given again to the same caller for the same request while it holds: nothing
    /// changed the cache, the settings or the app policy since (`Broker.isStillFresh`, `AppAccess.generation`), and
    /// its token is not yet due for a refresh. The front end counts it for the audit. nil: ask `cachedAnswer`.
    public func answerAgain(_ remembered: inout RememberedBusAnswer, method: String, correlationId: String, request: [UInt8])
        -> [UInt8]? {
        guard remembered.method == method, remembered.isAnswer(to: request),
              correlationId.utf8.count <= Broker1Requests.maximumCorrelationIdBytes,
              apps.generation == remembered.accessGeneration, broker.isStillFresh(&remembered.freshness) else { return nil }
        return remembered.answer(correlationId: correlationId)
    }

    /// An answer that ends a call early.
    struct EarlyAnswer: Error {
        var answer: JSONValue
    }

    /// `account: null` (a silent sign-in): the default account (BrokerCore's `AppAccess.defaultAccount`), with its
    /// username for the record; none, or more than one, is InteractionRequired, so that the client signs the user in.
    func defaultAccount(_ clientId: String, caller: CallerIdentity) async
        -> Result<(homeAccountId: String?, username: String?), EarlyAnswer> {
        switch await apps.defaultAccount(of: broker, for: caller, clientId: clientId) {
        case .only(let summary): return .success((summary.homeAccountId, summary.username))
        case .none:
            return .failure(EarlyAnswer(answer: Self.tokenError(status: .interactionRequired, tag: 0x6272_0011,
                                                                context: "no account is signed in to brokerd for this app")))
        case .several:
            return .failure(EarlyAnswer(answer: Self.tokenError(status: .interactionRequired, tag: 0x6272_0011,
                                                                context: "more than one account: the app must choose one")))
        }
    }

    /// Puts a token handed out on the record.
    func record(_ outcome: TokenOutcome, caller: CallerIdentity, clientId: String, scopes: [String],
                account: (homeAccountId: String?, username: String?)?) {
        let username = account?.homeAccountId == outcome.homeAccountId ? account?.username : nil
        apps.record(caller, frontEnd: "dbus", clientId: clientId, scopes: scopes, homeAccountId: outcome.homeAccountId,
                    username: username, outcome: outcome.source)
    }

    /// A refusal of brokerd's app policy on the client's numbering: status 9 (IncorrectConfiguration), which msal-python
    /// returns to the app as an error ("Status_IncorrectConfiguration", with the reason in the context) without
    /// retrying or falling back to a sign-in. The tag says which policy refused.
    static func refusal(_ refusal: AccessRefusal) -> JSONValue {
        tokenError(status: .incorrectConfiguration, tag: 0x6272_0040, context: "brokerd refused \(refusal.app): \(refusal.message) "
                   + "[\(refusal.reason.rawValue)]")
    }

    /// `brokerTokenResponse` as the client requires it: times in epoch milliseconds, `accessTokenType` 0 (Bearer),
    /// `clientInfo` (the client builds its account from it and from the id_token's `preferred_username`).
    /// `grantedScopes` is left out: when present the client refuses any requested scope missing from it, and a
    /// `.default` request is answered with the resource's scopes.
    static func tokenResponse(_ outcome: TokenOutcome, correlationId: String) -> JSONValue {
        guard let ids = HomeAccountId(outcome.homeAccountId) else {
            return tokenError(status: .unexpected, tag: 0x6272_0012,
                              context: "the account \(outcome.homeAccountId) is not an Entra account (uid.utid); MSAL clients cannot use it")
        }
        guard let idToken = outcome.idToken, let claims = try? JWTPayload.claims(of: idToken),
              !(claims["preferred_username"]?.stringValue ?? "").isEmpty else {
            return tokenError(status: .unexpected, tag: 0x6272_0013,
                              context: "no id_token with preferred_username is cached for this account and app; sign in again")
        }
        let response = JSONObject([
            "accessToken": .string(outcome.accessToken),
            "accessTokenType": .int(0),
            "idToken": .string(idToken),
            "clientInfo": .string(ids.clientInfo),
            "expiresOn": .int(milliseconds(outcome.expiresOn)),
            "extendedExpiresOn": .int(milliseconds(outcome.extendedExpiresOn)),
            "correlationId": .string(correlationId),
        ])
        return .object(JSONObject(["brokerTokenResponse": .object(response)]))
    }

    /// `tokenResponse` as text, written without building its JSON: the same bytes as `JSONWriter().string` of it
    /// (BrokerDBusTests). `preferredUsername` is the id token's claim as the cache read it when the token was stored
    /// (`CachedHit.idTokenUsername`), so a cache hit does not decode the id token; without it, `tokenResponse` decides.
    static func tokenResponseText(_ outcome: TokenOutcome, correlationId: String, preferredUsername: String?) -> String {
        guard var text = tokenResponseHead(outcome, preferredUsername: preferredUsername) else {
            return JSONWriter().string(tokenResponse(outcome, correlationId: correlationId))
        }
        finishTokenResponse(&text, correlationId: correlationId)
        return String(decoding: text, as: UTF8.self)
    }

    /// The response up to the correlation id's value (which comes last: each call brings its own); nil when
    /// `tokenResponse` must decide (no claim known, an account MSAL cannot use).
    /// `tokensNeedNoEscape`: neither token has a byte JSON escapes (`CachedHit`), so both are copied as they are.
    static func tokenResponseHead(_ outcome: TokenOutcome, preferredUsername: String?, tokensNeedNoEscape: Bool = false) -> [UInt8]? {
        guard let preferredUsername, !preferredUsername.isEmpty, let idToken = outcome.idToken,
              let ids = HomeAccountId(outcome.homeAccountId) else { return nil }
        var out: [UInt8] = []
        // The rest of the answer, its correlation id (a UUID) included, is about 340 bytes: room for it all.
        out.reserveCapacity(outcome.accessToken.utf8.count + idToken.utf8.count + 512)
        func writeToken(_ token: String) {
            if tokensNeedNoEscape {
                out.append(UInt8(ascii: "\""))
                out.append(contentsOf: token.utf8)
                out.append(UInt8(ascii: "\""))
            } else {
                JSONWriter.writeString(token, into: &out)
            }
        }
        out.append(contentsOf: #"{"brokerTokenResponse":{"accessToken":"#.utf8)
        writeToken(outcome.accessToken)
        out.append(contentsOf: #","accessTokenType":0,"idToken":"#.utf8)
        writeToken(idToken)
        out.append(contentsOf: #","clientInfo":""#.utf8)
        ids.writeClientInfo(into: &out)  // base64url: nothing in it JSON escapes
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: #","expiresOn":"#.utf8)
        JSONWriter.writeInteger(milliseconds(outcome.expiresOn), into: &out)
        out.append(contentsOf: #","extendedExpiresOn":"#.utf8)
        JSONWriter.writeInteger(milliseconds(outcome.extendedExpiresOn), into: &out)
        out.append(contentsOf: #","correlationId":"#.utf8)
        return out
    }

    static func finishTokenResponse(_ head: inout [UInt8], correlationId: String) {
        JSONWriter.writeString(correlationId, into: &head)
        head.append(contentsOf: "}}".utf8)
    }

    /// Saturating: a cached time can be any number.
    static func milliseconds(_ seconds: Int64) -> Int64 {
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000)
        return overflow ? (seconds < 0 ? .min : .max) : product
    }

    /// MSAL's meaning of a failure on the client's numbering; the context keeps the IdP's AADSTS text.
    static func tokenError(_ failure: TokenFailure) -> JSONValue {
        let oauth = failure.oauth
        var context = failure.description
        if let detail = oauth?.errorDescription, !context.contains(detail) { context += " | " + detail }
        let code = oauth?.errorCodes.first ?? 0
        switch failure {
        case .interactionRequired: return tokenError(status: .interactionRequired, tag: 0x6272_0020, errorCode: code, context: context)
        case .userCanceled: return tokenError(status: .userCanceled, tag: 0x6272_0021, errorCode: code, context: context)
        case .unavailable: return tokenError(status: .serverTemporarilyUnavailable, tag: 0x6272_0022, errorCode: code, context: context)
        case .serverDeclinedScopes: return tokenError(status: .apiContractViolation, tag: 0x6272_0023, errorCode: code, context: context)
        case .invalidRequest(_, let reason):
            let status: Broker1Status = switch reason {
            case .untrustedAuthority: .authorityUntrusted
            case .missingAuthority, .invalidAuthority, .discoveryFailed: .incorrectConfiguration
            case .ambiguousAccount, .missingScopes, .interactiveFlowRunning: .apiContractViolation
            }
            return tokenError(status: status, tag: 0x6272_0024, errorCode: code, context: context)
        case .protectionPoliciesRequired, .serverError, .internal:
            return tokenError(status: .unexpected, tag: 0x6272_0025, errorCode: code, context: context)
        }
    }

    static func tokenError(status: Broker1Status, tag: Int, errorCode: Int = 0, context: String) -> JSONValue {
        let error = JSONObject([
            "status": .int(status.rawValue), "errorCode": .int(errorCode), "tag": .int(tag), "subStatus": .int(0),
            "context": .string(context),
        ])
        return .object(JSONObject(["brokerTokenResponse": .object(JSONObject(["error": .object(error)]))]))
    }
}

/// A cache hit's answer as broker1 gave it, kept by the front end with the caller (its unique name) for the same
/// request asked again: pymsalruntime asks the same request for every token an app needs, each call with a new
/// correlation id. The request is compared whole; the answer is written again around the new correlation id.
public struct RememberedBusAnswer: Sendable {
    let method: String
    let request: [UInt8]
    /// The answer given, and how much of it comes before the correlation id's value.
    let given: [UInt8]
    let headCount: Int
    var freshness: HitFreshness
    let accessGeneration: UInt64
    /// What the audit records of each call it answers, and the number its count goes by (`HitAudit.countRepeat`),
    /// given by the front end.
    let subject: HitAudit.Subject
    var number = 0

    /// The answer's UTF-8 bytes: the head's and the correlation id's, both from Strings.
    func answer(correlationId: String) -> [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(headCount + correlationId.utf8.count + 8)
        text.append(contentsOf: given[..<headCount])
        Broker1Methods.finishTokenResponse(&text, correlationId: correlationId)
        return text
    }

    /// Whether `request` is the request answered, byte for byte.
    func isAnswer(to request: [UInt8]) -> Bool {
        guard self.request.count == request.count else { return false }
        guard !request.isEmpty else { return true }
        return self.request.withUnsafeBytes { kept in
            request.withUnsafeBytes { asked in memcmp(kept.baseAddress!, asked.baseAddress!, kept.count) == 0 }
        }
    }
}
