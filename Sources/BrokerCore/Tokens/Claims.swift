import BrokerJSON

/// The `claims` request parameter (OIDC Core §5.5): a claims challenge from a resource or the IdP, merged with the
/// client capabilities the app declares (`{"access_token": {"xms_cc": {"values": ["cp1"]}}}`, as MSAL does).
public enum Claims {
    public static func merged(challenge: String?, capabilities: [String]) -> String? {
        guard !capabilities.isEmpty else { return challenge }
        var root = JSONObject()
        if let challenge {
            // A challenge that is not a JSON object is passed on untouched: the IdP is the judge of it.
            guard case .object(let parsed)? = try? JSONReader.parse(challenge) else { return challenge }
            root = parsed
        }
        var accessToken = root["access_token"]?.objectValue ?? JSONObject()
        accessToken["xms_cc"] = .object(JSONObject(["values": .array(capabilities.map(JSONValue.string))]))
        root["access_token"] = .object(accessToken)
        return JSONWriter().string(.object(root))
    }
}
