import BrokerCache
internal import OAuth
import Subprocess
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

public struct InteractiveTokenRequest: Sendable {
    public enum Flow: String, Sendable { case browser, deviceCode }

    public var clientId: String
    public var authority: String?
    public var scopes: [String]
    public var extraScopesToConsent: [String]
    public var loginHint: String?
    public var prompt: String?
    public var claims: String?
    public var flow: Flow
    /// Seconds the caller waits at most (a D-Bus client gives up at 300 s); the sign-in ends by then. nil: only
    /// `interactive_timeout` applies.
    /// Seconds the whole sign-in may take from the call, when the caller has a deadline of its own: past it the
    /// sign-in is cancelled and ends as UserCanceled. The wait for the user is also bounded by
    /// `interactive_timeout`.
    public var timeLimitSeconds: Int64?

    public init(clientId: String, authority: String?, scopes: [String], extraScopesToConsent: [String] = [],
                loginHint: String? = nil, prompt: String? = nil, claims: String? = nil, flow: Flow = .browser,
                timeLimitSeconds: Int64? = nil) {
        self.clientId = clientId
        self.authority = authority
        self.scopes = scopes
        self.extraScopesToConsent = extraScopesToConsent
        self.loginHint = loginHint
        self.prompt = prompt
        self.claims = claims
        self.flow = flow
        self.timeLimitSeconds = timeLimitSeconds
    }

    /// The longest this sign-in may wait for the user.
    func waitLimit(_ settings: IdPClient.Settings) -> Int64 {
        min(settings.interactiveTimeoutSeconds, timeLimitSeconds ?? .max)
    }
}

/// What the user must be shown while an interactive request runs (sent to the caller as a notification).
public enum InteractionPrompt: Sendable {
    case browser(requestId: String, url: String)
    case deviceCode(requestId: String, userCode: String, verificationURI: String, expiresIn: Int64, message: String)
}

extension Broker {
    /// Signs the user in with the system browser (authorization code + PKCE, loopback redirect) or a device code.
    /// `prompt` is called with what to show; `cancelInteractiveFlow(requestId)` ends the wait with UserCanceled, and so
    /// does cancelling the calling task (its caller went away), from discovery on.
    /// One flow per (client, login hint) at a time: a second one is refused while the first runs. A device code is
    /// also published (status, `signInPending`) until the sign-in ends, for callers that cannot show it themselves.
    public func acquireTokenInteractively(_ request: InteractiveTokenRequest,
                                          prompt: @escaping @Sendable (InteractionPrompt) async -> Void) async throws(TokenFailure) -> TokenOutcome {
        let began = ContinuousClock.now
        let idp = try identityProvider()
        let authority = try idp.authority(requested: request.authority, clientId: request.clientId)
        learnAliases(of: authority, idp: idp)
        let scopes = Scopes.requested(request.scopes)
        let slot = "\(request.clientId.lowercased())\n\((request.loginHint ?? "").lowercased())"
        guard interactiveSlots.insert(slot).inserted else {
            throw .invalidRequest("an interactive sign-in for this app\(request.loginHint.map { " and \($0)" } ?? "") is already running",
                                  reason: .interactiveFlowRunning)
        }
        defer { interactiveSlots.remove(slot) }
        let requestId = PKCE.randomToken(bytes: 12)
        let metadata = try await providerMetadata(authority, idp: idp)
        if Task.isCancelled { throw .userCanceled("the sign-in was canceled: its caller went away") }
        let result = try await runFlow(request, requestId: requestId, idp: idp, metadata: metadata, began: began,
                                       prompt: publishing(prompt, request: request, waitLimit: request.waitLimit(idp.settings)))
        let now = now()
        let known = knownAccounts
        let saved = try cache.save(result.response, idToken: result.idToken, clientId: request.clientId, authority: authority,
                                   requestedScopes: scopes + request.extraScopesToConsent, usedRefreshTokenKey: nil,
                                   knownHomeAccountId: nil, now: now)
        let hid = saved.homeAccountId
        let isNew = !known.contains(hid.lowercased())
        cache.state.reveal(hid, to: request.clientId)
        cache.state.signInRequired.remove(hid.lowercased())
        cache.noteUse(TokenUse(clientId: request.clientId, homeAccountId: hid, authority: authority.url, scopes: scopes, lastUsed: now))
        do { try await commit() } catch { logger.error("signed in, but the cache could not be written: \(error)") }
        if isNew { emit(.accountAdded(homeAccountId: hid)) }
        logger.info("signed in interactively", metadata: ["account": "\(hid)", "client_id": "\(request.clientId)",
                                                          "flow": "\(request.flow.rawValue)"])
        try checkGranted(saved, requested: scopes)
        return Self.outcome(saved.accessToken, hid: hid, clientId: request.clientId, authority: authority, source: "interactive",
                            idToken: saved.idToken, cache: cache)
    }

    /// Runs the browser or device-code flow as a task that `cancelInteractiveFlow` and the time limit can end, and
    /// reads how it ended.
    private func runFlow(_ request: InteractiveTokenRequest, requestId: String, idp: IdPClient, metadata: ProviderMetadata,
                         began: ContinuousClock.Instant,
                         prompt: @escaping @Sendable (InteractionPrompt) async -> Void) async throws(TokenFailure) -> InteractiveResult {
        let task = Task<InteractiveResult, Error> {
            switch request.flow {
            case .browser:
                return try await BrowserSignIn(idp: idp, metadata: metadata, request: request, requestId: requestId).run(prompt: prompt)
            case .deviceCode:
                return try await DeviceCodeSignIn(idp: idp, metadata: metadata, request: request, requestId: requestId).run(prompt: prompt)
            }
        }
        interactiveFlows[requestId] = task
        // A caller with a deadline of its own (a D-Bus client gives up after 300 s) gets its answer within it: counted
        // from the call (discovery's time comes out of it), the sign-in and the code's redemption end as canceled.
        let deadline = request.timeLimitSeconds.map { limit in
            Task { [logger, clientId = request.clientId] () -> Bool in
                do { try await Task.sleep(until: began.advanced(by: .seconds(limit)), clock: .continuous) } catch { return false }
                logger.notice("interactive sign-in ran out of its time limit; cancelled", metadata: ["client_id": "\(clientId)"])
                task.cancel()
                return true
            }
        }
        defer {
            deadline?.cancel()
            interactiveFlows[requestId] = nil
        }
        do {
            let result = try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
            signInEnded(requestId, .completed)
            return result
        } catch {
            signInEnded(requestId, Self.signInEnd(of: error, cancelled: task.isCancelled))
            // Cancelled (the time limit, cancelInteractiveFlow, the caller gone): whatever the flow was doing when it
            // stopped (a request to the IdP ends as "cancelled"), the sign-in was canceled.
            if task.isCancelled {
                deadline?.cancel()
                if await deadline?.value == true {
                    throw .userCanceled("the sign-in did not end within its time limit of \(request.timeLimitSeconds ?? 0) s")
                }
                if let failure = error as? TokenFailure, case .userCanceled = failure { throw failure }
                throw .userCanceled("the sign-in was canceled")
            }
            switch error {
            case let failure as TokenFailure: throw failure
            case is CancellationError: throw .userCanceled("the sign-in was canceled")
            case is DeviceCodeExpired: throw .userCanceled("the device code expired before the sign-in was completed")
            default: throw .internal("\(error)")
            }
        }
    }

    /// `prompt`, with a device code also published as a pending sign-in.
    private func publishing(_ prompt: @escaping @Sendable (InteractionPrompt) async -> Void, request: InteractiveTokenRequest,
                            waitLimit: Int64) -> @Sendable (InteractionPrompt) async -> Void {
        { shown in
            if case .deviceCode(let requestId, let userCode, let uri, let expiresIn, let message) = shown {
                await self.signInWaiting(PendingSignIn(
                    requestId: requestId, clientId: request.clientId, loginHint: request.loginHint, userCode: userCode,
                    verificationURI: uri, expiresOn: self.now() + min(expiresIn, waitLimit), message: message))
            }
            if case .browser(let requestId, let url) = shown {
                await self.emit(.browserSignInPending(requestId: requestId, clientId: request.clientId,
                                                      loginHint: request.loginHint, url: url))
            }
            await prompt(shown)
            if case .browser(let requestId, _) = shown {
                // Its address holds the sign-in's state: the log says only that the sign-in waits.
                self.logger.debug("browser sign-in waiting for its redirect", metadata: ["request_id": "\(requestId)",
                                                                                        "client_id": "\(request.clientId)"])
            }
        }
    }

    /// Ends a running interactive request; false when none has that id.
    public func cancelInteractiveFlow(_ requestId: String) -> Bool {
        guard let task = interactiveFlows[requestId] else { return false }
        task.cancel()
        return true
    }

    var knownAccounts: Set<String> {
        Set(cache.all(.account).compactMap { $0.entity.homeAccountId?.lowercased() })
    }
}

struct InteractiveResult: Sendable {
    var response: TokenResponse
    var idToken: IdToken?
}

/// Authorization code + PKCE with a loopback redirect (RFC 8252), state and nonce checked.
struct BrowserSignIn: Sendable {
    let idp: IdPClient
    let metadata: ProviderMetadata
    let request: InteractiveTokenRequest
    let requestId: String
    /// How long the token endpoint may stay unreachable before the flow ends with the network error.
    static let unreachableLimit: Duration = .seconds(60)

    func run(prompt: @escaping @Sendable (InteractionPrompt) async -> Void) async throws -> InteractiveResult {
        let pkce = PKCE(), state = PKCE.randomToken(bytes: 16), nonce = PKCE.randomToken(bytes: 16)
        let listener: LoopbackRedirect
        do { listener = try await LoopbackRedirect.start(expectedState: state) } catch {
            throw TokenFailure.internal("cannot open the loopback redirect listener: \(error)")
        }
        let wireScopes = Scopes.onTheWire(request.scopes + request.extraScopesToConsent)
        var fields = [("client_id", request.clientId), ("response_type", "code"), ("redirect_uri", listener.redirectURI),
                      ("scope", wireScopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
                      ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method), ("client_info", "1")]
        if let hint = request.loginHint { fields.append(("login_hint", hint)) }
        if let value = request.prompt { fields.append(("prompt", value)) }
        if let claims = Claims.merged(challenge: request.claims, capabilities: idp.settings.clientCapabilities) {
            fields.append(("claims", claims))
        }
        let separator = metadata.authorizationEndpoint.contains("?") ? "&" : "?"
        let url = metadata.authorizationEndpoint + separator + FormEncoding.encode(fields)

        let timeout = request.waitLimit(idp.settings)
        let query: [String: String]? = try await withThrowingTaskGroup(of: [String: String]?.self) { group in
            group.addTask { await listener.nextRedirect() }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))
                throw TokenFailure.userCanceled("no sign-in within \(timeout) s")
            }
            group.addTask {
                await prompt(.browser(requestId: requestId, url: url))
                BrowserLauncher.open(url, policy: idp.settings.openBrowser)
                try await Task.sleep(for: .seconds(timeout + 60))
                return nil
            }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let next { return next }
            }
            return nil
        }
        await listener.close()
        try Task.checkCancellation()
        guard let query else { throw TokenFailure.userCanceled("the sign-in was canceled") }
        guard query["state"] == state else { throw TokenFailure.serverError("the redirect's state does not match the request", nil) }
        if let error = query["error"] {
            let oauth = OAuthErrorResponse(error: error, errorDescription: query["error_description"],
                                           suberror: query["suberror"], claims: query["claims"], httpStatus: 302)
            throw TokenFailure.fromInteractive(.oauth(oauth))
        }
        guard let code = query["code"] else { throw TokenFailure.serverError("the redirect carries no code", nil) }
        do {
            let response = try await idp.tokens.redeemCode(code, verifier: pkce.verifier, redirectURI: listener.redirectURI,
                                                           clientId: request.clientId, scopes: wireScopes,
                                                           claims: Claims.merged(challenge: request.claims,
                                                                                 capabilities: idp.settings.clientCapabilities),
                                                           metadata: metadata)
            return InteractiveResult(response: response,
                                     idToken: try await identity(of: response, idp: idp, metadata: metadata,
                                                                 clientId: request.clientId, nonce: nonce))
        } catch let failure as OAuthFailure {
            throw TokenFailure.fromInteractive(failure)
        }
    }
}

/// RFC 8628: show the user code, poll at `interval` (longer after `slow_down`) until approved, denied or expired.
struct DeviceCodeSignIn: Sendable {
    let idp: IdPClient
    let metadata: ProviderMetadata
    let request: InteractiveTokenRequest
    let requestId: String
    /// How long the token endpoint may stay unreachable before the flow ends with the network error.
    static let unreachableLimit: Duration = .seconds(60)

    func run(prompt: @escaping @Sendable (InteractionPrompt) async -> Void) async throws -> InteractiveResult {
        let wireScopes = Scopes.onTheWire(request.scopes + request.extraScopesToConsent)
        do {
            let device = try await idp.tokens.authorizeDevice(clientId: request.clientId, scopes: wireScopes,
                                                              claims: Claims.merged(challenge: request.claims,
                                                                                 capabilities: idp.settings.clientCapabilities),
                                                           metadata: metadata)
            let message = device.message
                ?? "To sign in, open \(device.verificationURI) in a browser and enter the code \(device.userCode)."
            await prompt(.deviceCode(requestId: requestId, userCode: device.userCode, verificationURI: device.verificationURI,
                                     expiresIn: device.expiresIn, message: message))
            let deadline = ContinuousClock.now + .seconds(min(device.expiresIn, request.waitLimit(idp.settings)))
            var interval = device.interval
            // Since when every poll has failed to reach the token endpoint: a code is not "expired" when the broker
            // could not ask, and a flow whose endpoint stays unreachable ends with the network error.
            var unreachableSince: ContinuousClock.Instant?
            var lastNetworkFailure: OAuthFailure?
            while true {
                try await Task.sleep(for: min(.seconds(interval), max(deadline - ContinuousClock.now, .zero)))
                guard ContinuousClock.now < deadline else {
                    if let lastNetworkFailure { throw lastNetworkFailure }
                    throw DeviceCodeExpired()
                }
                let response: TokenResponse
                do {
                    response = try await idp.tokens.pollDevice(device.deviceCode, clientId: request.clientId, metadata: metadata)
                } catch {
                    if case .unreachable = error {
                        let since = unreachableSince ?? .now
                        guard ContinuousClock.now - since < Self.unreachableLimit else { throw error }
                        (unreachableSince, lastNetworkFailure) = (since, error)
                        continue
                    }
                    (unreachableSince, lastNetworkFailure) = (nil, nil)
                    switch error {
                    case .oauth(let answer) where answer.error == "authorization_pending": continue
                    case .oauth(let answer) where answer.error == "slow_down":
                        interval = min(interval + 5, DeviceAuthorization.maxInterval)
                        continue
                    case .oauth(let answer) where answer.error == "expired_token": throw DeviceCodeExpired()
                    case .transient: continue  // a poll that did not get through; the next one may
                    default: throw error
                    }
                }
                return InteractiveResult(response: response,
                                         idToken: try await identity(of: response, idp: idp, metadata: metadata,
                                                                     clientId: request.clientId, nonce: nil))
            }
        } catch let failure as OAuthFailure {
            throw TokenFailure.fromInteractive(failure)
        }
    }
}

/// Who signed in: the validated id_token; or, when the response has neither an id_token nor client_info (the
/// device grant of some providers), the claims of the userinfo endpoint.
func identity(of response: TokenResponse, idp: IdPClient, metadata: ProviderMetadata, clientId: String,
              nonce: String?) async throws -> IdToken? {
    guard let raw = response.idToken else {
        if response.clientInfo != nil { return nil }
        do {
            return IdToken(userInfo: try await idp.tokens.userInfo(accessToken: response.accessToken, metadata: metadata))
        } catch {
            throw TokenFailure.fromInteractive(error)
        }
    }
    do {
        let token = try IdToken(raw: raw)
        try token.validate(issuer: metadata.issuer, clientId: clientId, nonce: nonce, now: idp.clock.now())
        return token
    } catch {
        throw TokenFailure.serverError(error.description, nil)
    }
}

/// Whether an interactive sign-in starts the user's browser (the `open_browser` setting).
public enum BrowserPolicy: String, Sendable, CaseIterable {
    /// When a display is present or `$BROWSER` names a browser (which may be a terminal one).
    case auto
    case always
    case never
}

/// Starts the user's browser on a URL: `$BROWSER`, else `xdg-open`, as `BrowserPolicy` allows.
enum BrowserLauncher {
    /// Whether `open` starts a browser under `policy` in this environment, and why (for the log).
    static func availability(policy: BrowserPolicy) -> (available: Bool, reason: String) {
        switch policy {
        case .never: return (false, "open_browser = \"never\"")
        case .always: return (true, "open_browser = \"always\"")
        case .auto:
            for name in ["WAYLAND_DISPLAY", "DISPLAY"] where variable(name) != nil { return (true, "$\(name) is set") }
            if variable("BROWSER") != nil { return (true, "$BROWSER is set") }
            return (false, "no display (DISPLAY and WAYLAND_DISPLAY unset) and no $BROWSER")
        }
    }

    /// An environment variable's value; nil when unset or empty.
    static func variable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    static func open(_ url: String, policy: BrowserPolicy) {
        guard availability(policy: policy).available else { return }
        let program = variable("BROWSER") ?? "xdg-open"
        let executable: Executable = program.contains("/") ? .path(FilePath(program)) : .name(program)
        // The sign-in waits for the redirect, never for this process: $BROWSER may be the browser itself, which runs
        // until it is closed. The run ends (and the child is reaped) whenever the process exits; its output is dropped.
        Task.detached {
            _ = try? await Subprocess.run(executable, arguments: [url], input: .none, output: .discarded, error: .discarded)
        }
    }
}
