import BrokerCache

/// The account a token request that names none means (MSAL's "silent sign-in", `account: null` over D-Bus): the only
/// account this app may see for its client ID. More than one, or none, is for the user to settle by signing in.
public enum DefaultAccount: Sendable {
    case only(AccountSummary)
    case none
    case several
}

extension AppAccess {
    /// The default account of `caller` for `clientId`: among the accounts the broker shows the client ID, those the
    /// app policy lets this app see.
    public nonisolated func defaultAccount(of broker: Broker, for caller: CallerIdentity, clientId: String) async -> DefaultAccount {
        let visible = visible(await broker.accounts(visibleTo: clientId), to: caller, clientId: clientId)
        switch visible.count {
        case 0: return .none
        case 1: return .only(visible[0])
        default: return .several
        }
    }
}
