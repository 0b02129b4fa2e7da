import BrokerJSON

// The accounts on the wire: how a request names one, and what getAccounts/getAccount/removeAccount/signOut answer.

public struct GetAccountsParams: Codable, Sendable {
    /// Accounts removed from this client are left out; without it every account is listed.
    public var clientId: String?
    public init(clientId: String? = nil) { self.clientId = clientId }
}

public struct GetAccountParams: Codable, Sendable {
    public var clientId: String
    public var homeAccountId: String?
    public var username: String?
    public init(clientId: String, homeAccountId: String? = nil, username: String? = nil) {
        self.clientId = clientId
        self.homeAccountId = homeAccountId
        self.username = username
    }
}

/// An account as a request names it: a string (homeAccountId, else username) or an object with
/// `homeAccountId` and/or `username` (what `getAccounts` returned may be passed back as it is).
public struct AccountReference: Codable, Sendable, Equatable {
    public var homeAccountId: String?
    public var username: String?
    /// Set when the caller sent a bare string.
    public var text: String?

    public init(_ text: String) { self.text = text }
    public init(homeAccountId: String? = nil, username: String? = nil) {
        self.homeAccountId = homeAccountId
        self.username = username
    }

    private enum CodingKeys: String, CodingKey { case homeAccountId, username }

    public init(from decoder: Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let text = try? single.decode(String.self) {
            self.text = text
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        homeAccountId = try container.decodeIfPresent(String.self, forKey: .homeAccountId)
        username = try container.decodeIfPresent(String.self, forKey: .username)
        if homeAccountId == nil && username == nil {
            throw DecodingError.dataCorruptedError(forKey: .homeAccountId, in: container,
                                                   debugDescription: "an account needs homeAccountId or username")
        }
    }

    public func encode(to encoder: Encoder) throws {
        if let text {
            var single = encoder.singleValueContainer()
            try single.encode(text)
            return
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(homeAccountId, forKey: .homeAccountId)
        try container.encodeIfPresent(username, forKey: .username)
    }
}

public struct RemoveAccountParams: Codable, Sendable {
    public var clientId: String
    public var account: AccountReference
    public init(clientId: String, account: AccountReference) {
        self.clientId = clientId
        self.account = account
    }
}

public struct SignOutParams: Codable, Sendable {
    public var account: AccountReference
    public init(account: AccountReference) { self.account = account }
}

public struct AccessTokenInfo: Codable, Sendable, Equatable {
    public var scopes: [String]
    public var realm: String?
    public var expiresOn: Int64?
    public init(scopes: [String], realm: String?, expiresOn: Int64?) {
        self.scopes = scopes
        self.realm = realm
        self.expiresOn = expiresOn
    }
}

public struct AppTokens: Codable, Sendable, Equatable {
    public var clientId: String
    public var familyId: String?
    public var hasRefreshToken: Bool
    public var accessTokens: [AccessTokenInfo]
    public init(clientId: String, familyId: String?, hasRefreshToken: Bool, accessTokens: [AccessTokenInfo]) {
        self.clientId = clientId
        self.familyId = familyId
        self.hasRefreshToken = hasRefreshToken
        self.accessTokens = accessTokens
    }
}

public struct TenantProfile: Codable, Sendable, Equatable {
    public var realm: String
    public var environment: String
    public var localAccountId: String?
    public var username: String?
    public init(realm: String, environment: String, localAccountId: String?, username: String?) {
        self.realm = realm
        self.environment = environment
        self.localAccountId = localAccountId
        self.username = username
    }
}

/// An account (SPEC §2): stable `homeAccountId`, displayable `username`, `environment`, home `realm`, and the
/// tenants it signed in to. `apps` says which clients hold tokens for it (never the tokens).
public struct Account: Codable, Sendable, Equatable {
    public var homeAccountId: String
    public var username: String
    public var environment: String
    public var realm: String
    public var localAccountId: String?
    public var name: String?
    public var authorityType: String?
    public var tenantProfiles: [TenantProfile]
    public var apps: [AppTokens]
    public var hiddenFrom: [String]
    public var signInRequired: Bool
    /// The claims of the account's id_token in its home tenant (MSAL's `accountClaims`), when one is cached.
    public var accountClaims: JSONValue?

    public init(homeAccountId: String, username: String, environment: String, realm: String, localAccountId: String?,
                name: String?, authorityType: String?, tenantProfiles: [TenantProfile], apps: [AppTokens],
                hiddenFrom: [String], signInRequired: Bool, accountClaims: JSONValue? = nil) {
        self.accountClaims = accountClaims
        self.homeAccountId = homeAccountId
        self.username = username
        self.environment = environment
        self.realm = realm
        self.localAccountId = localAccountId
        self.name = name
        self.authorityType = authorityType
        self.tenantProfiles = tenantProfiles
        self.apps = apps
        self.hiddenFrom = hiddenFrom
        self.signInRequired = signInRequired
    }
}

public struct AccountsResult: Codable, Sendable, Equatable {
    public var accounts: [Account]
    public init(accounts: [Account]) { self.accounts = accounts }
}

public struct AccountResult: Codable, Sendable, Equatable {
    /// null when no account matches (or it was removed from this client), as MSAL's `account(forIdentifier:)`.
    public var account: Account?
    public init(account: Account?) { self.account = account }

    private enum CodingKeys: String, CodingKey { case account }

    /// `"account": null` is written out, not left away: clients test the member.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(account, forKey: .account)
    }
}

public struct RemovalResult: Codable, Sendable, Equatable {
    public var homeAccountId: String
    public var removedAccessTokens: Int
    public var removedRefreshTokens: Int
    public var removedIdTokens: Int
    public var removedAccounts: Int
    public var familyRefreshTokensKept: Int
    public init(homeAccountId: String, removedAccessTokens: Int, removedRefreshTokens: Int, removedIdTokens: Int,
                removedAccounts: Int, familyRefreshTokensKept: Int) {
        self.homeAccountId = homeAccountId
        self.removedAccessTokens = removedAccessTokens
        self.removedRefreshTokens = removedRefreshTokens
        self.removedIdTokens = removedIdTokens
        self.removedAccounts = removedAccounts
        self.familyRefreshTokensKept = familyRefreshTokensKept
    }
}
