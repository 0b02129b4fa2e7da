import BrokerJSON
import BrokerProtocol

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An account as MSAL shows it (MSALAccount): `identifier` is the stable home account id, `username` is for display
/// only. Pass it back to `acquireTokenSilent` and `remove` as it is.
public struct BrokerAccount: Sendable, Equatable, Hashable {
    /// The home account id (`<oid>.<tid>` for Entra accounts, the id_token `sub` elsewhere): stable, opaque.
    public var identifier: String { wire.homeAccountId }
    /// preferred_username / upn: may change, never an identifier.
    public var username: String { wire.username }
    /// The authority host the account signed in at, e.g. `login.microsoftonline.com`.
    public var environment: String { wire.environment }
    /// The home tenant.
    public var realm: String { wire.realm }
    public var name: String? { wire.name }
    /// The claims of the home tenant's id_token (MSAL's `accountClaims`), when brokerd has one.
    public var accountClaims: JSONValue? { wire.accountClaims }
    /// The tenants this account signed in to (guest tenants included).
    public var tenantProfiles: [TenantProfile] { wire.tenantProfiles }
    /// A refresh failed with invalid_grant: the next silent call will ask for interaction.
    public var signInRequired: Bool { wire.signInRequired }

    /// The `<oid>` and `<tid>` halves of an Entra home account id (nil for other identity providers).
    public var objectId: String? { homeAccountIdParts?.objectId }
    public var tenantId: String? { homeAccountIdParts?.tenantId }

    /// What brokerd sent, for fields this type does not surface.
    public let wire: Account

    public init(_ wire: Account) { self.wire = wire }

    public static func == (lhs: BrokerAccount, rhs: BrokerAccount) -> Bool { lhs.identifier == rhs.identifier }
    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }

    private var homeAccountIdParts: (objectId: String, tenantId: String)? {
        let parts = identifier.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    var reference: AccountReference { AccountReference(homeAccountId: identifier) }
}

/// Where a token came from.
public enum TokenSource: String, Sendable {
    /// The broker's cache: no network.
    case cache
    /// A refresh token was redeemed.
    case refresh
    /// The user signed in.
    case interactive
}

/// A successful token acquisition (MSALResult).
public struct AuthenticationResult: Sendable {
    public var accessToken: String { wire.accessToken }
    /// `Bearer`, or `pop`…
    public var tokenType: String { wire.tokenType }
    public var expiresOn: Date { Date(timeIntervalSince1970: TimeInterval(wire.expiresOn)) }
    public var extendedExpiresOn: Date { Date(timeIntervalSince1970: TimeInterval(wire.extendedExpiresOn)) }
    /// When the broker will renew the token ahead of expiry (Entra's `refresh_in`).
    public var refreshOn: Date? { wire.refreshOn.map { Date(timeIntervalSince1970: TimeInterval($0)) } }
    /// The scopes the token carries (may be more than asked; see `BrokerError.serverDeclinedScopes` for fewer).
    public var scopes: [String] { wire.grantedScopes }
    public var idToken: String? { wire.idToken }
    public var account: BrokerAccount { BrokerAccount(wire.account) }
    public var authority: String { wire.authority }
    public var correlationId: String? { wire.correlationId }
    public var source: TokenSource? { TokenSource(rawValue: wire.source) }

    public let wire: TokenResult

    public init(_ wire: TokenResult) { self.wire = wire }
}

// A result printed or dumped for debugging must not show its tokens.
extension AuthenticationResult: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { wire.description }
    public var debugDescription: String { wire.description }
    public var customMirror: Mirror { wire.customMirror }
}
