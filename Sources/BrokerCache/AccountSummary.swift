import BrokerJSON

/// An account as apps and `brokerctl` see it: one home account, with a profile per tenant it signed in to and
/// the apps that hold tokens for it. Secrets never appear here.
public struct AccountSummary: Sendable, Equatable {
    public struct TenantProfile: Sendable, Equatable {
        public var realm: String
        public var environment: String
        public var localAccountId: String?
        public var username: String?
    }

    public struct AccessTokenInfo: Sendable, Equatable {
        public var scopes: [String]
        public var realm: String?
        public var expiresOn: Int64?
    }

    public struct AppTokens: Sendable, Equatable {
        public var clientId: String
        public var familyId: String?
        public var hasRefreshToken: Bool
        public var accessTokens: [AccessTokenInfo]
    }

    public var homeAccountId: String
    public var username: String
    public var environment: String
    public var realm: String
    public var localAccountId: String?
    public var name: String?
    public var authorityType: String?
    public var tenants: [TenantProfile]
    public var apps: [AppTokens]
    /// Clients this account was removed from (per-app removal hides it from them).
    public var hiddenFrom: [String]
    public var signInRequired: Bool
    /// The claims of the account's id_token in its home tenant (MSAL's accountClaims), when one is cached, as their
    /// canonical wire text (`JWTPayload.canonicalClaims`): what a token result's account writes, made without a tree.
    public var accountClaimsText: [UInt8]? = nil

    /// The claims as a value (read from their text), for the answers encoded whole (`getAccounts`).
    public var accountClaims: JSONObject? {
        guard let accountClaimsText, case .object(let object)? = try? JSONReader.parse(accountClaimsText) else {
            return nil
        }
        return object
    }
}

/// How a caller names an account: its homeAccountId, or (the ADAL migration path) its username.
public enum AccountSelector: Sendable, Equatable, CustomStringConvertible {
    case homeAccountId(String)
    case username(String)
    /// A string that is tried as a homeAccountId first, then as a username (what `brokerctl ACCOUNT` takes).
    case either(String)

    public var description: String {
        switch self {
        case .homeAccountId(let id): return "homeAccountId \(id)"
        case .username(let name): return "username \(name)"
        case .either(let text): return text
        }
    }
}

/// What a removal or sign-out took away, by section.
public struct RemovalReport: Sendable, Equatable {
    public var homeAccountId: String
    public var accessTokens = 0
    public var refreshTokens = 0
    public var idTokens = 0
    public var accounts = 0
    /// Family refresh tokens kept so that the app's FOCI siblings keep single sign-on.
    public var familyRefreshTokensKept = 0

    public init(homeAccountId: String) {
        self.homeAccountId = homeAccountId
    }
}

public struct ImportReport: Sendable, Equatable {
    public var added = 0
    public var replaced = 0
    public var keptNewer = 0
    public var accounts = 0

    public init() {}
}

extension AccountSummary.AppTokens {
    /// An app with no tokens known yet.
    init(_ clientId: String) {
        self.init(clientId: clientId, familyId: nil, hasRefreshToken: false, accessTokens: [])
    }
}
