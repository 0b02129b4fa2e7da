import BrokerCache
import BrokerCore
import BrokerJSON
import BrokerProtocol

/// The token methods: wire params → broker requests, outcomes → TokenResult, TokenFailure → MSAL error codes.
extension RequestRouter {
    func acquireTokenSilently(_ p: AcquireTokenSilentlyParams) async throws -> [UInt8] {
        let outcome = try await broker.acquireTokenSilently(try Self.silentRequest(p))
        return try await encode(outcome, clientId: p.clientId, correlationId: p.correlationId)
    }

    static func silentRequest(_ p: AcquireTokenSilentlyParams) throws -> SilentTokenRequest {
        try requireNonEmpty(p.clientId, "clientId")
        return SilentTokenRequest(clientId: p.clientId, authority: p.authority,
                                  scopes: Scopes.withResource(p.scopes, resource: p.resource),
                                  account: try selector(p.account), forceRefresh: p.forceRefresh ?? false, claims: p.claims)
    }

    /// The answer to a repeated silent request, from `memo`, before the line is parsed: nil when the line is not
    /// one the memo holds (or its answer no longer holds).
    func rememberedAnswer(_ line: [UInt8], from peer: PeerIdentity, memory: inout ConnectionMemory) -> RememberedAnswer? {
        let started = Threads.nowNanoseconds()
        guard let shape = RequestLineShape(line), let answer = memory.answers.answer(to: shape, line: line, broker: broker)
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
    func cachedAnswer(_ request: RPCRequest, line: [UInt8], from peer: PeerIdentity, memory: inout ConnectionMemory) -> [UInt8]? {
        guard request.method == BrokerMethod.acquireTokenSilently.rawValue, let id = request.id else { return nil }
        let started = Threads.nowNanoseconds()
        guard let p = try? params(AcquireTokenSilentlyParams.self, request), let silent = try? Self.silentRequest(p),
              let hit = broker.cachedSilentToken(silent),
              let text = try? TokenResultText(Self.result(hit.outcome, account: hit.account, correlationId: nil))
        else { return nil }
        if let shape = RequestLineShape(line), shape.id == id, shape.correlationId == .some(p.correlationId) {
            memory.answers.remember(.init(text: text, freshness: hit.freshness), for: shape, line: line)
        }
        let json = text.json(correlationId: p.correlationId)
        logHit(from: peer, since: started, into: &memory.log)
        return RPCEnvelope.success(id: id, resultJSON: json)
    }

    func acquireTokenInteractively(_ p: AcquireTokenInteractivelyParams, link: ConnectionLink) async throws -> [UInt8] {
        try Self.requireNonEmpty(p.clientId, "clientId")
        guard let flow = InteractiveTokenRequest.Flow(rawValue: p.flow ?? "browser") else {
            throw RPCError.invalidParams("'flow' must be \"browser\" or \"deviceCode\"", reason: "invalidFlow")
        }
        let request = InteractiveTokenRequest(clientId: p.clientId, authority: p.authority,
                                              scopes: Scopes.withResource(p.scopes, resource: p.resource),
                                              extraScopesToConsent: p.extraScopesToConsent ?? [], loginHint: p.loginHint,
                                              prompt: p.prompt, claims: p.claims, flow: flow)
        let broker = self.broker
        let outcome = try await broker.acquireTokenInteractively(request) { prompt in
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
            link.whenClosed { Task { _ = await broker.cancelInteractiveFlow(requestId) } }
        }
        return try await encode(outcome, clientId: p.clientId, correlationId: p.correlationId)
    }

    private func encode(_ outcome: TokenOutcome, clientId: String, correlationId: String?) async throws -> [UInt8] {
        guard let summary = await broker.accountSummary(homeAccountId: outcome.homeAccountId) else {
            throw RPCError(code: RPCErrorCode.brokerInternal, message: "the token's account is not in the cache")
        }
        return try Self.encode(outcome, account: summary, correlationId: correlationId)
    }

    static func encode(_ outcome: TokenOutcome, account: AccountSummary, correlationId: String?) throws -> [UInt8] {
        try ProtocolCoding.encode(result(outcome, account: account, correlationId: correlationId))
    }

    static func result(_ outcome: TokenOutcome, account: AccountSummary, correlationId: String?) -> TokenResult {
        TokenResult(
            accessToken: outcome.accessToken, tokenType: outcome.tokenType, expiresOn: outcome.expiresOn,
            extendedExpiresOn: outcome.extendedExpiresOn, refreshOn: outcome.refreshOn, grantedScopes: outcome.grantedScopes,
            idToken: outcome.idToken, account: wire(account), authority: outcome.authority, correlationId: correlationId,
            source: outcome.source)
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
        case .unavailable:
            code = RPCErrorCode.serverError
            data["reason"] = .string("unavailable")
            data["retryable"] = .bool(true)
        case .invalidRequest(_, let reason):
            return RPCError.invalidParams(failure.description, reason: reason)
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
                guard let json = try? Self.params(of: event) else { continue }
                link.sendEvent(RPCEnvelope.notification(method: event.name, paramsJSON: json))
            }
        })
        return try ProtocolCoding.encode(SubscribeResult(events: wanted))
    }

    static func params(of event: BrokerEvent) throws -> [UInt8] {
        switch event {
        case .accountAdded(let hid): return try ProtocolCoding.encode(AccountEventNotification(homeAccountId: hid, clientId: nil))
        case .accountRemoved(let hid, let client):
            return try ProtocolCoding.encode(AccountEventNotification(homeAccountId: hid, clientId: client))
        case .signInRequired(let hid, let client):
            return try ProtocolCoding.encode(AccountEventNotification(homeAccountId: hid, clientId: client))
        case .statusChanged: return try ProtocolCoding.encode(AccountEventNotification(homeAccountId: nil, clientId: nil))
        case .signInPending(let pending): return try ProtocolCoding.encode(wire(pending))
        case .signInEnded(let requestId, let clientId, let end):
            return try ProtocolCoding.encode(SignInEndedNotification(requestId: requestId, clientId: clientId, outcome: end.rawValue))
        }
    }

    static func wire(_ pending: PendingSignIn) -> PendingSignInInfo {
        PendingSignInInfo(requestId: pending.requestId, clientId: pending.clientId, loginHint: pending.loginHint,
                          userCode: pending.userCode, verificationUri: pending.verificationURI, expiresOn: pending.expiresOn,
                          message: pending.message)
    }
}
