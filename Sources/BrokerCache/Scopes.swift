/// Scope handling as MSAL does it (reference §4): the broker adds the OIDC scopes on the wire; callers never
/// have to, and a cached token's target is what the IdP granted.
public enum Scopes {
    public static let reserved: Set<String> = ["openid", "profile", "offline_access"]

    /// The caller's scopes without duplicates or reserved scopes, order kept. `/.default` scopes are kept as
    /// written (append, never trim: `https://management.core.windows.net//.default`).
    public static func requested(_ scopes: [String]) -> [String] {
        var seen = Set<String>(), result: [String] = []
        for scope in scopes.map({ $0.trimmingSpaces }) where !scope.isEmpty {
            let lower = scope.lowercased()
            if reserved.contains(lower) || seen.contains(lower) { continue }
            seen.insert(lower)
            result.append(scope)
        }
        return result
    }

    /// What goes on the wire: the request plus openid, profile and offline_access, sorted (as msal-python sends it).
    public static func onTheWire(_ scopes: [String]) -> [String] {
        Array(Set(requested(scopes)).union(reserved)).sorted()
    }

    /// Requested scopes the IdP did not grant (case-insensitive). `email` counts as granted when not echoed,
    /// as MSAL does; so does `<resource>/.default`, which the IdP answers with the permissions it stands for.
    public static func declined(requested: [String], granted: [String]) -> [String] {
        let grantedSet = Set(granted.map { $0.lowercased() })
        return requested.filter {
            let scope = $0.lowercased()
            return !grantedSet.contains(scope) && scope != "email" && !scope.hasSuffix("/.default")
        }
    }

    /// ADAL-style callers name a resource; the v2 endpoint wants `<resource>/.default` — appended, never trimmed,
    /// so a v1 resource ending in `/` gives the double slash it needs.
    public static func withResource(_ scopes: [String], resource: String?) -> [String] {
        guard let resource, !resource.isEmpty else { return scopes }
        return scopes + [resource + "/.default"]
    }

    public static func split(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }
}

extension String {
    package var trimmingSpaces: String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}
