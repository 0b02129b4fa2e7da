// Params and results of token acquisition (SPEC §5).

public struct AcquireTokenSilentlyParams: Codable, Sendable {
    public var clientId: String
    /// Default: the client's authority from the configuration (a profile with this client id, else `default_authority`).
    public var authority: String?
    public var scopes: [String]
    /// ADAL-style: a resource instead of scopes, asked for as `<resource>/.default`.
    public var resource: String?
    public var account: AccountReference
    public var forceRefresh: Bool?
    /// A claims challenge (JSON); bypasses the access-token cache.
    public var claims: String?
    public var correlationId: String?

    public init(clientId: String, authority: String? = nil, scopes: [String], account: AccountReference,
                forceRefresh: Bool? = nil, claims: String? = nil, correlationId: String? = nil, resource: String? = nil) {
        self.clientId = clientId
        self.authority = authority
        self.scopes = scopes
        self.resource = resource
        self.account = account
        self.forceRefresh = forceRefresh
        self.claims = claims
        self.correlationId = correlationId
    }
}

public struct AcquireTokenInteractivelyParams: Codable, Sendable {
    public var clientId: String
    public var authority: String?
    public var scopes: [String]
    /// ADAL-style: a resource instead of scopes, asked for as `<resource>/.default`.
    public var resource: String?
    public var extraScopesToConsent: [String]?
    public var loginHint: String?
    /// `login`, `consent`, `select_account`, `none` (sent to the IdP as is).
    public var prompt: String?
    public var claims: String?
    /// `browser` (default) or `deviceCode`.
    public var flow: String?
    public var correlationId: String?

    public init(clientId: String, authority: String? = nil, scopes: [String], extraScopesToConsent: [String]? = nil,
                loginHint: String? = nil, prompt: String? = nil, claims: String? = nil, flow: String? = nil,
                correlationId: String? = nil, resource: String? = nil) {
        self.clientId = clientId
        self.authority = authority
        self.scopes = scopes
        self.resource = resource
        self.extraScopesToConsent = extraScopesToConsent
        self.loginHint = loginHint
        self.prompt = prompt
        self.claims = claims
        self.flow = flow
        self.correlationId = correlationId
    }
}

public struct CancelInteractiveFlowParams: Codable, Sendable {
    public var requestId: String
    public init(requestId: String) { self.requestId = requestId }
}

public struct CancelInteractiveFlowResult: Codable, Sendable, Equatable {
    /// False when no interactive request with that id was running.
    public var canceled: Bool
    public init(canceled: Bool) { self.canceled = canceled }
}

/// The token result (SPEC §5).
public struct TokenResult: Codable, Sendable, Equatable {
    public var accessToken: String
    public var tokenType: String
    public var expiresOn: Int64
    public var extendedExpiresOn: Int64
    public var refreshOn: Int64?
    public var grantedScopes: [String]
    public var idToken: String?
    public var account: Account
    public var authority: String
    public var correlationId: String?
    /// `cache`, `refresh` or `interactive`.
    public var source: String

    public init(accessToken: String, tokenType: String, expiresOn: Int64, extendedExpiresOn: Int64, refreshOn: Int64?,
                grantedScopes: [String], idToken: String?, account: Account, authority: String, correlationId: String?,
                source: String) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresOn = expiresOn
        self.extendedExpiresOn = extendedExpiresOn
        self.refreshOn = refreshOn
        self.grantedScopes = grantedScopes
        self.idToken = idToken
        self.account = account
        self.authority = authority
        self.correlationId = correlationId
        self.source = source
    }
}

// Printing or dumping a token result (logs, debuggers, test failures) must not show its tokens.
extension TokenResult: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "TokenResult(account: \(account.homeAccountId), scopes: \(grantedScopes), expiresOn: \(expiresOn), "
            + "source: \(source), authority: \(authority), accessToken: <redacted>, idToken: \(idToken == nil ? "nil" : "<redacted>"))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(self, children: [
            "accessToken": "<redacted>", "tokenType": tokenType, "expiresOn": expiresOn,
            "extendedExpiresOn": extendedExpiresOn, "refreshOn": refreshOn as Any, "grantedScopes": grantedScopes,
            "idToken": idToken == nil ? "nil" : "<redacted>", "account": account, "authority": authority,
            "correlationId": correlationId as Any, "source": source,
        ])
    }
}

/// `browserUrl` notification: the app may open the URL itself; brokerd also starts a browser when it can.
public struct BrowserURLNotification: Codable, Sendable, Equatable {
    public var requestId: String
    public var url: String
    public init(requestId: String, url: String) {
        self.requestId = requestId
        self.url = url
    }
}

/// `deviceCode` notification (RFC 8628): what to show the user.
public struct DeviceCodeNotification: Codable, Sendable, Equatable {
    public var requestId: String
    public var userCode: String
    public var verificationUri: String
    public var expiresIn: Int64
    public var message: String
    public init(requestId: String, userCode: String, verificationUri: String, expiresIn: Int64, message: String) {
        self.requestId = requestId
        self.userCode = userCode
        self.verificationUri = verificationUri
        self.expiresIn = expiresIn
        self.message = message
    }
}

public struct SubscribeParams: Codable, Sendable {
    /// Event names (accountAdded, accountRemoved, signInRequired, statusChanged, signInPending, signInEnded); all when
    /// absent.
    public var events: [String]?
    public init(events: [String]? = nil) { self.events = events }
}

public struct SubscribeResult: Codable, Sendable, Equatable {
    public var events: [String]
    public init(events: [String]) { self.events = events }
}

/// The params of an event notification. `clientId` is set on signInRequired and on a removal from one app.
public struct AccountEventNotification: Codable, Sendable, Equatable {
    public var homeAccountId: String?
    public var clientId: String?
    public init(homeAccountId: String?, clientId: String?) {
        self.homeAccountId = homeAccountId
        self.clientId = clientId
    }
}

/// A device-code sign-in waiting for the user: the `signInPending` event and an entry of `getStatus.pendingSignIns`.
/// The user code is meant for the user's eyes; the device code is never sent.
public struct PendingSignInInfo: Codable, Sendable, Equatable {
    public var requestId: String
    public var clientId: String
    public var loginHint: String?
    public var userCode: String
    public var verificationUri: String
    /// When brokerd stops waiting (epoch seconds).
    public var expiresOn: Int64
    public var message: String

    public init(requestId: String, clientId: String, loginHint: String?, userCode: String, verificationUri: String,
                expiresOn: Int64, message: String) {
        self.requestId = requestId
        self.clientId = clientId
        self.loginHint = loginHint
        self.userCode = userCode
        self.verificationUri = verificationUri
        self.expiresOn = expiresOn
        self.message = message
    }
}

/// `signInEnded`: a pending sign-in is over. `outcome`: completed, cancelled, expired or failed.
public struct SignInEndedNotification: Codable, Sendable, Equatable {
    public var requestId: String
    public var clientId: String
    public var outcome: String

    public init(requestId: String, clientId: String, outcome: String) {
        self.requestId = requestId
        self.clientId = clientId
        self.outcome = outcome
    }
}
