import BrokerJSON

/// A token an app asked for: which the background refresh keeps fresh.
public struct TokenUse: Sendable, Equatable {
    public var clientId: String
    public var homeAccountId: String
    public var authority: String
    public var scopes: [String]
    public var lastUsed: Int64

    /// The fields lowercased, the scopes sorted, joined by spaces. Every cache hit notes its use by this key, so it is
    /// written into one string, copying nothing that is already lowercase.
    package var key: String {
        var key = ""
        key.reserveCapacity(clientId.utf8.count + homeAccountId.utf8.count + authority.utf8.count
                            + scopes.reduce(0) { $0 + $1.utf8.count + 1 } + 2)
        key += clientId.lowercasedIfNeeded
        key += " "
        key += homeAccountId.lowercasedIfNeeded
        key += " "
        key += authority.lowercasedIfNeeded
        var lowered = scopes.map(\.lowercasedIfNeeded)
        if lowered.count > 1 { lowered.sort() }
        for scope in lowered {
            key += " "
            key += scope
        }
        return key
    }

    package init(clientId: String, homeAccountId: String, authority: String, scopes: [String], lastUsed: Int64) {
        self.clientId = clientId
        self.homeAccountId = homeAccountId
        self.authority = authority
        self.scopes = scopes
        self.lastUsed = lastUsed
    }

    package init?(json: JSONValue) {
        guard let object = json.objectValue, let clientId = object["clientId"]?.stringValue,
              let hid = object["homeAccountId"]?.stringValue, let authority = object["authority"]?.stringValue else { return nil }
        self.init(clientId: clientId, homeAccountId: hid, authority: authority,
                  scopes: (object["scopes"]?.arrayValue ?? []).compactMap(\.stringValue),
                  lastUsed: object["lastUsed"]?.integerValue ?? 0)
    }

    package var json: JSONValue {
        .object(JSONObject([
            "clientId": .string(clientId), "homeAccountId": .string(homeAccountId), "authority": .string(authority),
            "scopes": .array(scopes.map(JSONValue.string)), "lastUsed": .string(String(lastUsed)),
        ]))
    }
}
