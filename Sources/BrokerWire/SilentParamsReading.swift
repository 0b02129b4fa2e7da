import BrokerJSON
import BrokerProtocol

extension AcquireTokenSilentlyParams {
    /// The params of the usual request, read member by member without the Codable decoder (a fifth of a cache hit
    /// that no memo serves went to it). nil for anything but the plain shape: a member given twice, a value of
    /// another type, a number or raw value where a string is wanted. The caller then decodes with `ProtocolCoding`,
    /// which accepts or refuses it and says why; what this accepts, that decodes to the same value (ProtocolTests).
    public init?(plain params: JSONValue?) {
        guard case .object(let object)? = params, object.members.count <= 32 else { return nil }
        var clientId: String?, authority: String?, scopes: [String]?, resource: String?, account: AccountReference?
        var forceRefresh: Bool?, claims: String?, correlationId: String?
        // A member given twice: the params have a few members (past 32 the decoder reads them), found in a list.
        var seen: [String] = []
        seen.reserveCapacity(object.members.count)
        for member in object.members {
            guard !seen.contains(member.key) else { return nil }
            seen.append(member.key)
            let value = member.value
            switch member.key {
            case "clientId": guard case .string(let text) = value else { return nil }; clientId = text
            case "authority": guard Self.optionalString(value, into: &authority) else { return nil }
            case "resource": guard Self.optionalString(value, into: &resource) else { return nil }
            case "claims": guard Self.optionalString(value, into: &claims) else { return nil }
            case "correlationId": guard Self.optionalString(value, into: &correlationId) else { return nil }
            case "forceRefresh":
                switch value {
                case .null: forceRefresh = nil
                case .bool(let flag): forceRefresh = flag
                default: return nil
                }
            case "scopes":
                guard case .array(let items) = value else { return nil }
                var list: [String] = []
                list.reserveCapacity(items.count)
                for item in items {
                    guard case .string(let scope) = item else { return nil }
                    list.append(scope)
                }
                scopes = list
            case "account":
                guard let reference = AccountReference(plain: value) else { return nil }
                account = reference
            default:
                continue  // as the decoder: members it does not know are ignored
            }
        }
        guard let clientId, let scopes, let account else { return nil }
        self.init(clientId: clientId, authority: authority, scopes: scopes, account: account, forceRefresh: forceRefresh,
                  claims: claims, correlationId: correlationId, resource: resource)
    }

    private static func optionalString(_ value: JSONValue, into slot: inout String?) -> Bool {
        switch value {
        case .null: slot = nil
        case .string(let text): slot = text
        default: return false
        }
        return true
    }
}

extension AccountReference {
    /// A bare string, or an object with homeAccountId and/or username as strings; nil for anything else.
    init?(plain value: JSONValue) {
        switch value {
        case .string(let text):
            self.init(text)
        case .object(let object):
            guard object.members.count <= 32 else { return nil }
            var homeAccountId: String?, username: String?, seen: [String] = []
            for member in object.members {
                guard !seen.contains(member.key) else { return nil }
                seen.append(member.key)
                switch (member.key, member.value) {
                case ("homeAccountId", .string(let text)): homeAccountId = text
                case ("username", .string(let text)): username = text
                case ("homeAccountId", .null), ("username", .null): continue
                case ("homeAccountId", _), ("username", _): return nil
                default: continue
                }
            }
            guard homeAccountId != nil || username != nil else { return nil }
            self.init(homeAccountId: homeAccountId, username: username)
        default:
            return nil
        }
    }
}
