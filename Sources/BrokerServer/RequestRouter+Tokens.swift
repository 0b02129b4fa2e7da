import BrokerCache
import BrokerCore
import BrokerJSON
import BrokerProtocol
import BrokerWire

/// The token methods: wire params → broker requests, outcomes → TokenResult, TokenFailure → MSAL error codes.
extension RequestRouter {
    func acquireTokenSilently(_ p: AcquireTokenSilentlyParams, caller: CallerIdentity) async throws -> [UInt8] {
        let request = try Self.silentRequest(p)
        let names = await accountNames(request.account, clientId: p.clientId)
        try await authorize(caller, clientId: p.clientId, account: names, scopes: request.scopes)
        let outcome: TokenOutcome
        do { outcome = try await broker.acquireTokenSilently(request) } catch {
            recordFailure(error, caller: caller, clientId: p.clientId, scopes: request.scopes, account: names)
            throw error
        }
        return try await encode(outcome, clientId: p.clientId, correlationId: p.correlationId, caller: caller,
                                scopes: request.scopes)
    }

    /// The names of the account a request names (its home account ID and username), for grants limited to accounts
    /// and for the audit; what the request said when the broker does not know the account.
    func accountNames(_ selector: AccountSelector, clientId: String) async -> (homeAccountId: String?, username: String?) {
        if let summary = try? await broker.account(selector, visibleTo: clientId) { return (summary.homeAccountId, summary.username) }
        switch selector {
        case .homeAccountId(let id): return (id, nil)
        case .username(let name): return (nil, name)
        case .either(let text): return text.utf8.contains(UInt8(ascii: "@")) ? (nil, text) : (text, nil)
        }
    }

    /// The app policy's answer for this caller, asking the user when it says so; a refusal is thrown as
    /// `appNotAllowed` (and is on the record).
    func authorize(_ caller: CallerIdentity, clientId: String, account: (homeAccountId: String?, username: String?)?,
                   scopes: [String]) async throws {
        if case .failure(let refusal) = await apps.authorize(caller, frontEnd: "socket", clientId: clientId, account: account,
                                                             scopes: scopes) {
            throw Self.rpcError(refusal)
        }
    }

    static func rpcError(_ refusal: AccessRefusal) -> RPCError {
        RPCError(code: RPCErrorCode.appNotAllowed, message: refusal.message, data: .object(JSONObject([
            "app": .string(refusal.app.description), "clientId": .string(refusal.clientId),
            "reason": .string(refusal.reason.rawValue),
        ])))
    }

    /// Records a token request that failed (the failure's word, never its detail: it may quote the IdP).
    func recordFailure(_ error: Error, caller: CallerIdentity, clientId: String, scopes: [String],
                       account: (homeAccountId: String?, username: String?)?) {
        let word: String
        if let failure = error as? TokenFailure { word = failure.auditWord } else { word = "error" }
        apps.record(caller, frontEnd: "socket", clientId: clientId, scopes: scopes, homeAccountId: account?.homeAccountId,
                    username: account?.username, outcome: word)
    }

    static func silentRequest(_ p: AcquireTokenSilentlyParams) throws -> SilentTokenRequest {
        try requireNonEmpty(p.clientId, "clientId")
        return SilentTokenRequest(clientId: p.clientId, authority: p.authority,
                                  scopes: Scopes.withResource(p.scopes, resource: p.resource),
                                  account: try selector(p.account), forceRefresh: p.forceRefresh ?? false, claims: p.claims)
    }

    /// The answer to a repeated silent request, from `memo`, before the line is parsed: nil when the line is not
    /// one the memo holds (or its answer no longer holds).
    func rememberedAnswer(_ line: [UInt8], shape: RequestLineShape?, from peer: PeerIdentity,
                          memory: inout ConnectionMemory) -> RememberedAnswer? {
        let started = Threads.nowNanoseconds()
        guard let shape, let answer = memory.answers.answer(to: shape, line: line, broker: broker)
        else { return nil }
        logHit(from: peer, since: started, into: &memory.log)
        return answer
    }

    /// The answer to the request this connection had answered last, asked again (`SilentAnswerMemo`); nil for any
    /// other line. Compares bytes only: it runs before anything else on every line.
    func repeatedAnswer(_ line: UnsafeRawBufferPointer, from peer: PeerIdentity, memory: inout ConnectionMemory) -> RememberedAnswer? {
        let started = Threads.nowNanoseconds()
        guard let answer = memory.answers.answer(repeating: line, broker: broker) else { return nil }
        logHit(from: peer, since: started, into: &memory.log)
        return answer
    }

    /// The answer to a silent request that the cache can give at once, made on the calling thread (the connection's
    /// own): no task, no actor hop. The answer is remembered for the next time the same line comes. nil
    /// sends the request the usual way (`answer`), which also reports every error, so this path never has to.
    /// Only an app the policy allows now, without asking, is answered here (AccessMemo); the rest goes the full way,
    /// where it is asked about or refused.
    func cachedAnswer(_ request: RPCRequest, line: [UInt8], shape: RequestLineShape?, from peer: PeerIdentity,
                      caller: CallerIdentity, memory: inout ConnectionMemory) -> RememberedAnswer? {
        guard request.method == BrokerMethod.acquireTokenSilently.rawValue, let id = request.id,
              let p = try? params(AcquireTokenSilentlyParams.self, request) else { return nil }
        return cachedAnswer(id: id, params: p, line: line, shape: shape, from: peer, caller: caller, memory: &memory)
    }

    /// `cachedAnswer` for a request already read (`SilentRequestLine`, or the usual parse and decode).
    func cachedAnswer(id: String, params p: AcquireTokenSilentlyParams, line: [UInt8], shape: RequestLineShape?,
                      from peer: PeerIdentity, caller: CallerIdentity, memory: inout ConnectionMemory) -> RememberedAnswer? {
        let started = Threads.nowNanoseconds()
        guard let silent = try? Self.silentRequest(p),
              let hit = broker.cachedSilentToken(silent, accountText: SocketWire.accountText),
              memory.access.allows(caller, clientId: p.clientId, account: (hit.outcome.homeAccountId, hit.username),
                                   scopes: silent.scopes, in: apps),
              let text = SocketWire.tokenResultText(hit)
        else { return nil }
        let subject = HitAudit.Subject(clientId: p.clientId, homeAccountId: hit.outcome.homeAccountId,
                                       username: hit.username, scopes: silent.scopes)
        var number = 0
        if let shape, shape.id == id, shape.correlationId == .some(p.correlationId) {
            number = memory.nextSubjectNumber
            memory.nextSubjectNumber += 1
            memory.answers.remember(.init(text: text, freshness: hit.freshness, subject: subject, number: number),
                                    for: shape, line: line)
        }
        logHit(from: peer, since: started, into: &memory.log)
        let finished = memory.audit.add(subject, number: number, at: broker.now())
        if !finished.isEmpty { apps.record(finished, caller: caller, frontEnd: "socket") }
        // Written as the remembered answers are, in pieces: the result is not copied into an envelope.
        return RememberedAnswer(text: text, id: id, correlationId: p.correlationId, subjectNumber: number)
    }

    func acquireTokenInteractively(_ p: AcquireTokenInteractivelyParams, caller: CallerIdentity,
                                   link: ConnectionLink) async throws -> [UInt8] {
        try Self.requireNonEmpty(p.clientId, "clientId")
        let requested = Scopes.withResource(p.scopes, resource: p.resource)
        try await authorize(caller, clientId: p.clientId, account: p.loginHint.map { (nil, $0) }, scopes: requested)
        guard let flow = InteractiveTokenRequest.Flow(rawValue: p.flow ?? "browser") else {
            throw RPCError.invalidParams("'flow' must be \"browser\" or \"deviceCode\"", reason: "invalidFlow")
        }
        let request = InteractiveTokenRequest(clientId: p.clientId, authority: p.authority, scopes: requested,
                                              extraScopesToConsent: p.extraScopesToConsent ?? [], loginHint: p.loginHint,
                                              prompt: p.prompt, claims: p.claims, flow: flow)
        let broker = self.broker
        let outcome: TokenOutcome
        // The sign-in runs in a task of its own, cancelled when the connection closes, from discovery on: an app that
        // went away before its prompt was shown must not hold its client's sign-in slot until the timeout.
        let signIn = Task { () async throws(TokenFailure) -> TokenOutcome in
            try await broker.acquireTokenInteractively(request) { prompt in
                let message: [UInt8]?
                let requestId: String
                switch prompt {
                case .browser(let id, let url):
                    requestId = id
                    message = (try? ProtocolCoding.encode(BrowserURLNotification(requestId: requestId, url: url)))
                        .map { RPCEnvelope.notification(method: BrokerNotification.browserUrl.rawValue, paramsJSON: $0) }
                case .deviceCode(let id, let userCode, let uri, let expiresIn, let text):
                    requestId = id
                    message = (try? ProtocolCoding.encode(DeviceCodeNotification(
                        requestId: requestId, userCode: userCode, verificationUri: uri, expiresIn: expiresIn, message: text)))
                        .map { RPCEnvelope.notification(method: BrokerNotification.deviceCode.rawValue, paramsJSON: $0) }
                }
                if let message { link.send(message) }
            }
        }
        link.whenClosed { signIn.cancel() }
        do {
            outcome = try await signIn.value
        } catch {
            recordFailure(error, caller: caller, clientId: p.clientId, scopes: requested, account: p.loginHint.map { (nil, $0) })
            throw error
        }
        return try await encode(outcome, clientId: p.clientId, correlationId: p.correlationId, caller: caller, scopes: requested)
    }

    /// The token result, once the grant (if it limits accounts) covers the account the token is for; on the record.
    private func encode(_ outcome: TokenOutcome, clientId: String, correlationId: String?, caller: CallerIdentity,
                        scopes: [String]) async throws -> [UInt8] {
        guard let summary = await broker.accountSummary(homeAccountId: outcome.homeAccountId) else {
            throw RPCError(code: RPCErrorCode.brokerInternal, message: "the token's account is not in the cache")
        }
        let account = (homeAccountId: Optional(summary.homeAccountId), username: Optional(summary.username))
        if case .refuse(let refusal) = apps.decide(caller, clientId: clientId, account: account, scopes: scopes),
           refusal.reason == .outsideGrant {
            apps.record(caller, frontEnd: "socket", clientId: clientId, scopes: scopes, homeAccountId: account.homeAccountId,
                        username: account.username, outcome: "refused", detail: "\(refusal.reason.rawValue): \(refusal.message)")
            throw Self.rpcError(refusal)
        }
        apps.record(caller, frontEnd: "socket", clientId: clientId, scopes: scopes, homeAccountId: account.homeAccountId,
                    username: account.username, outcome: outcome.source)
        return try SocketWire.encodedTokenResult(outcome, account: summary, correlationId: correlationId)
    }

    /// msal-python's classification of a suberror: the ones an app cannot act on become "" (reference §3.1, §5.3);
    /// basic_action, additional_action, message_only, consent_required, user_password_expired… are kept as they are.
    static func classification(of suberror: String) -> String {
        ["bad_token", "token_expired", "protection_policy_required", "client_mismatch", "device_authentication_failed"]
            .contains(suberror) ? "" : suberror
    }

    /// MSAL's codes with the OAuth detail in `data` (error, suberror, errorCodes, correlationId, claims, …).
    static func rpcError(_ failure: TokenFailure) -> RPCError {
        var data = JSONObject()
        if let oauth = failure.oauth {
            data["error"] = .string(oauth.error)
            if let v = oauth.errorDescription { data["errorDescription"] = .string(v) }
            if let v = oauth.suberror {
                data["suberror"] = .string(v)
                data["classification"] = .string(Self.classification(of: v))
            }
            if !oauth.errorCodes.isEmpty { data["errorCodes"] = .array(oauth.errorCodes.map { .int($0) }) }
            if let v = oauth.correlationId { data["correlationId"] = .string(v) }
            if let v = oauth.claims { data["claims"] = .string(v) }
        }
        let code: Int
        switch failure {
        case .interactionRequired: code = RPCErrorCode.interactionRequired
        case .serverDeclinedScopes(let granted, let declined):
            code = RPCErrorCode.serverDeclinedScopes
            data["grantedScopes"] = .array(granted.map(JSONValue.string))
            data["declinedScopes"] = .array(declined.map(JSONValue.string))
        case .protectionPoliciesRequired: code = RPCErrorCode.serverProtectionPoliciesRequired
        case .userCanceled: code = RPCErrorCode.userCanceled
        case .serverError: code = RPCErrorCode.serverError
        case .unavailable(_, let retryAfter):
            code = RPCErrorCode.serverError
            data["reason"] = .string("unavailable")
            data["retryable"] = .bool(true)
            if let retryAfter {
                data["network"] = .bool(true)
                data["retryAfter"] = .int(Int(retryAfter))
            }
        case .invalidRequest(_, let reason):
            return RPCError.invalidParams(failure.description, reason: reason.rawValue)
        case .internal: code = RPCErrorCode.brokerInternal
        }
        return RPCError(code: code, message: failure.description, data: data.members.isEmpty ? nil : .object(data))
    }
}

extension RequestRouter {
    static let eventNames = BrokerNotification.events.map(\.rawValue)

    /// Forwards the broker's events to this connection as notifications until it closes.
    func subscribe(_ p: SubscribeParams, link: ConnectionLink) async throws -> [UInt8] {
        let wanted = p.events ?? Self.eventNames
        if let unknown = wanted.first(where: { !Self.eventNames.contains($0) }) {
            throw RPCError.invalidParams("unknown event '\(unknown)' (events: \(Self.eventNames.joined(separator: ", ")))",
                                         reason: "unknownEvent")
        }
        let events = await broker.events()
        let selected = Set(wanted)
        link.attach(Task {
            for await event in events where selected.contains(event.name) {
                guard let json = try? Self.params(of: event) ?? nil else { continue }
                link.sendEvent(RPCEnvelope.notification(method: event.name, paramsJSON: json))
            }
        })
        return try ProtocolCoding.encode(SubscribeResult(events: wanted))
    }

    /// nil for the broker's internal events (hooks), which `subscribe` does not offer.
    static func params(of event: BrokerEvent) throws -> [UInt8]? {
        switch event {
        case .tokenRefreshed, .refreshFailed, .browserSignInPending: return nil
        case .accountAdded(let hid): return try ProtocolCoding.encode(AccountEventNotification(homeAccountId: hid, clientId: nil))
        case .accountRemoved(let hid, let client):
            return try ProtocolCoding.encode(AccountEventNotification(homeAccountId: hid, clientId: client))
        case .signInRequired(let hid, let client):
            return try ProtocolCoding.encode(AccountEventNotification(homeAccountId: hid, clientId: client))
        case .statusChanged: return try ProtocolCoding.encode(AccountEventNotification(homeAccountId: nil, clientId: nil))
        case .signInPending(let pending): return try ProtocolCoding.encode(wire(pending))
        case .signInEnded(let requestId, let clientId, let end):
            return try ProtocolCoding.encode(SignInEndedNotification(requestId: requestId, clientId: clientId, outcome: end.rawValue))
        case .consentPending(let consent): return try ProtocolCoding.encode(wire(consent))
        case .consentEnded(let consent, let end):
            return try ProtocolCoding.encode(ConsentEndedNotification(consentId: consent.consentId, app: consent.app.description,
                                                                      clientId: consent.clientId, outcome: end.rawValue))
        }
    }

    static func wire(_ pending: PendingSignIn) -> PendingSignInInfo {
        PendingSignInInfo(requestId: pending.requestId, clientId: pending.clientId, loginHint: pending.loginHint,
                          userCode: pending.userCode, verificationUri: pending.verificationURI, expiresOn: pending.expiresOn,
                          message: pending.message)
    }
}
