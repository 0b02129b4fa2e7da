import BrokerJSON

/// What brokerd remembers beyond the MSAL schema: which apps an account was removed from (it stays hidden from
/// them until they sign it in again) and which accounts need an interactive sign-in. All ids lower-cased.
public struct BrokerState: Sendable, Equatable {
    public static let sectionName = "brokerd"

    public var hidden: [String: Set<String>] = [:]
    public var signInRequired: Set<String> = []
    /// What apps asked tokens for (client, account, authority, scopes) and when, by `TokenUse.key`: the background
    /// refresh renews these before they expire and keeps their refresh tokens alive.
    public var uses: [String: TokenUse] = [:]

    public init() {}

    package init(json: String) {
        guard case .object(let root)? = try? JSONReader.parse(json) else { return }
        if case .object(let byClient)? = root["hiddenAccounts"] {
            for member in byClient.members {
                let ids = (member.value.arrayValue ?? []).compactMap(\.stringValue)
                if !ids.isEmpty { hidden[member.key.lowercased()] = Set(ids.map { $0.lowercased() }) }
            }
        }
        signInRequired = Set((root["signInRequired"]?.arrayValue ?? []).compactMap(\.stringValue).map { $0.lowercased() })
        for item in root["tokenUses"]?.arrayValue ?? [] {
            if let use = TokenUse(json: item) { uses[use.key] = use }
        }
    }

    package var isEmpty: Bool { hidden.isEmpty && signInRequired.isEmpty && uses.isEmpty }

    /// The state without token uses (persisted as rows of their own).
    package var smallStateJSON: String {
        var copy = self
        copy.uses = [:]
        return copy.json
    }

    package var json: String {
        var byClient = JSONObject()
        for client in hidden.keys.sorted() {
            byClient[client] = .array(hidden[client]!.sorted().map(JSONValue.string))
        }
        let root = JSONObject([
            "hiddenAccounts": .object(byClient),
            "signInRequired": .array(signInRequired.sorted().map(JSONValue.string)),
            "tokenUses": .array(uses.keys.sorted().map { uses[$0]!.json }),
        ])
        return JSONWriter().string(.object(root))
    }

    public func isHidden(_ homeAccountId: String, from clientId: String) -> Bool {
        // Asked on every cache hit, when nearly always nothing is hidden: no lowercased copies then.
        guard !hidden.isEmpty else { return false }
        return hidden[clientId.lowercasedIfNeeded]?.contains(homeAccountId.lowercasedIfNeeded) ?? false
    }

    package mutating func hide(_ homeAccountId: String, from clientId: String) {
        hidden[clientId.lowercased(), default: []].insert(homeAccountId.lowercased())
    }

    /// A sign-in of the account in that app undoes an earlier removal from it.
    package mutating func reveal(_ homeAccountId: String, to clientId: String) {
        let client = clientId.lowercased()
        hidden[client]?.remove(homeAccountId.lowercased())
        if hidden[client]?.isEmpty == true { hidden[client] = nil }
    }

    package mutating func forget(_ homeAccountId: String) {
        let id = homeAccountId.lowercased()
        for client in hidden.keys {
            hidden[client]?.remove(id)
            if hidden[client]?.isEmpty == true { hidden[client] = nil }
        }
        signInRequired.remove(id)
        uses = uses.filter { $0.value.homeAccountId.lowercased() != id }
    }
}
