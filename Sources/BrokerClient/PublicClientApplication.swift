import BrokerJSON
import BrokerProtocol
import Synchronization

/// How the user signs in interactively.
public enum InteractiveFlow: String, Sendable {
    /// The system browser (brokerd opens it when it can; the app gets the URL too), with a loopback redirect.
    case browser
    /// RFC 8628: a code to enter on any device. For SSH sessions and machines without a browser.
    case deviceCode
}

/// The OIDC `prompt` of an interactive sign-in (MSALPromptType).
public enum PromptType: String, Sendable {
    /// Ask for credentials even when the identity provider has a session.
    case login
    /// Ask for consent again.
    case consent
    /// Let the user pick among the identity provider's accounts.
    case selectAccount = "select_account"
    /// No UI at the identity provider (fails when it would need some).
    case none
}

/// What the user must see during an interactive sign-in.
public enum InteractivePrompt: Sendable, Equatable {
    /// Open `url` in a browser (brokerd tries `$BROWSER` / xdg-open too when a display is present).
    case openBrowser(url: String, requestId: String)
    /// Show `message` (it names the code and the address).
    case deviceCode(userCode: String, verificationURI: String, expiresIn: Int64, message: String, requestId: String)

    /// Pass it to `PublicClientApplication.cancelInteractive(requestId:)` to end the sign-in.
    public var requestId: String {
        switch self {
        case .openBrowser(_, let id), .deviceCode(_, _, _, _, let id): return id
        }
    }
}

/// An app's view of the broker, shaped like MSAL's `MSALPublicClientApplication`: one client id (the app
/// registration) and its authority; silent first, interactive only on `BrokerError.interactionRequired`.
///
/// ```swift
/// let app = PublicClientApplication(clientId: "my-app", authority: "https://login.microsoftonline.com/common")
/// let result: AuthenticationResult
/// if let account = try await app.allAccounts().first {
///     do { result = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account) }
///     catch .interactionRequired { result = try await app.acquireToken(scopes: ["User.Read"]) }
/// } else {
///     result = try await app.acquireToken(scopes: ["User.Read"])
/// }
/// ```
///
/// Every call goes to brokerd over its Unix socket; calls may run concurrently. Tokens are shared with every other
/// app of the user through the broker, so signing in once gives single sign-on.
public final class PublicClientApplication: Sendable {
    public let clientId: String
    /// nil: the authority brokerd is configured with for this client (`default_authority` or a profile).
    public let authority: String?
    /// How long an interactive sign-in may take before the call gives up (brokerd has its own limit too).
    public let interactiveTimeoutSeconds: Int
    let connection: BrokerConnection

    /// `socketPath` nil finds brokerd as brokerctl does: `$BROKERD_SOCKET`, else
    /// `$XDG_RUNTIME_DIR/brokerd/brokerd.sock`. `blockingCalls` is for command-line tools that make a call or two
    /// and exit (`BrokerConnection.init`); apps leave it off.
    public init(clientId: String, authority: String? = nil, socketPath: String? = nil,
                interactiveTimeoutSeconds: Int = 3600, blockingCalls: Bool = false) {
        self.clientId = clientId
        self.authority = authority
        self.interactiveTimeoutSeconds = interactiveTimeoutSeconds
        connection = BrokerConnection(socketPath: socketPath, checkProtocolVersion: true, blockingCalls: blockingCalls)
    }

    /// Closes the connection to brokerd now rather than when the application is released; a later call reopens it.
    public func close() async {
        await connection.disconnect()
    }

    /// The socket this application talks to.
    public var socketPath: String { connection.socketPath }

    // MARK: Tokens

    /// A token without any UI: from the cache when it has one with these scopes and over 5 minutes left, else by
    /// redeeming a refresh token. Throws `.interactionRequired` when only the user can help.
    public func acquireTokenSilent(scopes: [String], account: BrokerAccount, forceRefresh: Bool = false,
                                   claims: String? = nil, authority: String? = nil,
                                   correlationId: String? = nil) async throws(BrokerError) -> AuthenticationResult {
        let params = AcquireTokenSilentlyParams(clientId: clientId, authority: authority ?? self.authority, scopes: scopes,
                                                account: account.reference, forceRefresh: forceRefresh ? true : nil,
                                                claims: claims, correlationId: correlationId)
        return AuthenticationResult(try await call(.acquireTokenSilently, params, as: TokenResult.self))
    }

    /// Signs the user in (always involves the user). `onPrompt` gets the browser URL or the device code as soon as
    /// brokerd has it; it runs on a SwiftNIO thread, so it must return quickly (hand the prompt to your UI).
    /// Cancelling the calling task cancels the sign-in at brokerd; the call then throws `.userCanceled`.
    ///
    /// `account` preselects that account (its username is the login hint). `extraScopesToConsent` asks consent for
    /// scopes of other resources now, so that later silent calls for them work without another prompt.
    public func acquireToken(scopes: [String], flow: InteractiveFlow = .browser, account: BrokerAccount? = nil,
                             extraScopesToConsent: [String] = [], loginHint: String? = nil, prompt: PromptType? = nil,
                             claims: String? = nil, authority: String? = nil, correlationId: String? = nil,
                             onPrompt: @escaping @Sendable (InteractivePrompt) -> Void = { _ in })
        async throws(BrokerError) -> AuthenticationResult {
        let hint = loginHint ?? account.flatMap { $0.username.isEmpty ? nil : $0.username }
        let params = AcquireTokenInteractivelyParams(
            clientId: clientId, authority: authority ?? self.authority, scopes: scopes,
            extraScopesToConsent: extraScopesToConsent.isEmpty ? nil : extraScopesToConsent, loginHint: hint,
            prompt: prompt?.rawValue, claims: claims, flow: flow.rawValue, correlationId: correlationId)
        let seen = PromptLog()
        do {
            let wire = try await connection.call(.acquireTokenInteractively, params, as: TokenResult.self,
                                                 timeoutSeconds: interactiveTimeoutSeconds) { method, json in
                guard let prompt = Self.prompt(method, json) else { return }
                seen.record(prompt.requestId)
                onPrompt(prompt)
            } onCancel: {
                // With a request id, brokerd is asked to stop waiting for the redirect (or the device code) and
                // answers UserCanceled, so that the sign-in is over when this call returns. Before the first prompt
                // there is none: the connection is closed instead, which cancels the sign-in too.
                guard let requestId = seen.requestId,
                      let params = try? ProtocolCoding.encode(CancelInteractiveFlowParams(requestId: requestId)) else { return nil }
                return (BrokerMethod.cancelInteractiveFlow.rawValue, params)
            }
            return AuthenticationResult(wire)
        } catch {
            throw BrokerError(error)
        }
    }

    /// The same sign-in as an `AsyncSequence`: prompts as they come, then the result. Ending the iteration early
    /// cancels the sign-in.
    public func acquireTokenEvents(scopes: [String], flow: InteractiveFlow = .browser, account: BrokerAccount? = nil,
                                   extraScopesToConsent: [String] = [], loginHint: String? = nil,
                                   prompt promptType: PromptType? = nil, claims: String? = nil, authority: String? = nil,
                                   correlationId: String? = nil) -> AsyncThrowingStream<InteractiveEvent, Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    let result = try await acquireToken(
                        scopes: scopes, flow: flow, account: account, extraScopesToConsent: extraScopesToConsent,
                        loginHint: loginHint, prompt: promptType, claims: claims, authority: authority,
                        correlationId: correlationId) { step in continuation.yield(.prompt(step)) }
                    continuation.yield(.completed(result))
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Ends a running interactive sign-in of this user (its `acquireToken` call fails with `.userCanceled`).
    /// False when no sign-in with that id runs.
    @discardableResult
    public func cancelInteractive(requestId: String) async throws(BrokerError) -> Bool {
        try await call(.cancelInteractiveFlow, CancelInteractiveFlowParams(requestId: requestId),
                       as: CancelInteractiveFlowResult.self).canceled
    }

    // MARK: Accounts

    /// The accounts this app can use: every account of the broker except those removed from this app.
    public func allAccounts() async throws(BrokerError) -> [BrokerAccount] {
        try await call(.getAccounts, GetAccountsParams(clientId: clientId), as: AccountsResult.self).accounts.map(BrokerAccount.init)
    }

    /// The account with this home account id, or nil.
    public func account(forIdentifier identifier: String) async throws(BrokerError) -> BrokerAccount? {
        try await call(.getAccount, GetAccountParams(clientId: clientId, homeAccountId: identifier),
                       as: AccountResult.self).account.map(BrokerAccount.init)
    }

    /// The account with this username (case-insensitive, as ADAL apps stored it), or nil. Throws
    /// `.invalidRequest` (reason `ambiguousAccount`) when several accounts have it.
    public func account(forUsername username: String) async throws(BrokerError) -> BrokerAccount? {
        try await call(.getAccount, GetAccountParams(clientId: clientId, username: username),
                       as: AccountResult.self).account.map(BrokerAccount.init)
    }

    /// Removes the account from this app only: its tokens for this client go and the account is hidden from it.
    /// Other apps keep single sign-on (use `BrokerControl.signOut` to sign out everywhere).
    public func remove(_ account: BrokerAccount) async throws(BrokerError) {
        _ = try await call(.removeAccount, RemoveAccountParams(clientId: clientId, account: account.reference),
                           as: RemovalResult.self)
    }

    // MARK: Plumbing

    func call<Params: Encodable & Sendable, Result: Decodable & Sendable>(_ method: BrokerMethod, _ params: Params,
                                                    as type: Result.Type) async throws(BrokerError) -> Result {
        do { return try await connection.call(method, params, as: type) } catch { throw BrokerError(error) }
    }

    static func prompt(_ method: String, _ json: [UInt8]) -> InteractivePrompt? {
        switch BrokerNotification(rawValue: method) {
        case .browserUrl:
            guard let note = try? ProtocolCoding.decode(BrowserURLNotification.self, from: json) else { return nil }
            return .openBrowser(url: note.url, requestId: note.requestId)
        case .deviceCode:
            guard let note = try? ProtocolCoding.decode(DeviceCodeNotification.self, from: json) else { return nil }
            return .deviceCode(userCode: note.userCode, verificationURI: note.verificationUri, expiresIn: note.expiresIn,
                               message: note.message, requestId: note.requestId)
        default:
            return nil
        }
    }
}

/// A step of `acquireTokenEvents`.
public enum InteractiveEvent: Sendable {
    case prompt(InteractivePrompt)
    case completed(AuthenticationResult)
}

/// The request id of the running sign-in, written by the notification handler and read by the cancel handler
/// (both synchronous, on different threads).
private final class PromptLog: Sendable {
    private let id = Mutex<String?>(nil)
    func record(_ requestId: String) { id.withLock { $0 = requestId } }
    var requestId: String? { id.withLock { $0 } }
}
