/// What one connection (or one D-Bus caller) learned of the policy for its own caller: the client IDs it may use
/// whatever it asks, until the policy's `generation` moves. A cache hit of an allowed app then costs one atomic load
/// and a set lookup, and takes no lock another connection takes. Kept by its owner, never shared.
public struct AccessMemo: Sendable {
    private var generation: UInt64 = 0
    private var unlimited: Set<String> = []
    /// The client ID of `unlimited` allowed last: an app asks for its own client's tokens, and comparing with it
    /// spares hashing the ID (SipHash over 36 bytes) on each hit.
    private var lastUnlimited = ""

    public init() {}

    /// True when the caller may have this client ID's token now without asking anyone; false sends the request to
    /// `AppAccess.authorize` (which asks, refuses and records).
    public mutating func allows(_ caller: CallerIdentity, clientId: String, account: (homeAccountId: String?, username: String?)?,
                                scopes: [String], in access: AppAccess) -> Bool {
        let current = access.generation
        if current != generation {
            unlimited.removeAll(keepingCapacity: true)
            lastUnlimited = ""
            generation = current
        }
        if !clientId.isEmpty, clientId == lastUnlimited { return true }
        if unlimited.contains(clientId) {
            lastUnlimited = clientId
            return true
        }
        guard case .allow = access.decide(caller, clientId: clientId, account: account, scopes: scopes) else { return false }
        if access.isUnlimited(caller.app, clientId: clientId) { unlimited.insert(clientId) }
        return true
    }
}
