/// Scope handling as MSAL does it (reference §4): the broker adds the OIDC scopes on the wire; callers never
/// have to, and a cached token's target is what the IdP granted.
public enum Scopes {
    public static let reserved: Set<String> = ["openid", "profile", "offline_access"]

    /// The caller's scopes without duplicates or reserved scopes, order kept. `/.default` scopes are kept as
    /// written (append, never trim: `https://management.core.windows.net//.default`).
    public static func requested(_ scopes: [String]) -> [String] {
        // Every silent request comes through here, most naming one or two scopes: those are compared in a list, with
        // no set built and nothing copied that is already trimmed and lowercase.
        if scopes.count == 1 {
            // Most requests name one scope: nothing to compare it with, and no new list when it needs no trimming.
            let scope = scopes[0].trimmingSpaces
            if scope.isEmpty || isReserved(ignoringCase: scope) { return [] }
            return scope.utf8.count == scopes[0].utf8.count ? scopes : [scope]
        }
        var seenList: [String] = [], seenSet: Set<String>?, result: [String] = []
        result.reserveCapacity(scopes.count)
        if scopes.count > 16 { seenSet = [] } else { seenList.reserveCapacity(scopes.count) }
        for scope in scopes {
            let scope = scope.trimmingSpaces
            guard !scope.isEmpty else { continue }
            let lower = scope.lowercasedIfNeeded
            if isReserved(lower) { continue }
            if seenSet != nil {
                guard seenSet!.insert(lower).inserted else { continue }
            } else {
                guard !seenList.contains(lower) else { continue }
                seenList.append(lower)
            }
            result.append(scope)
        }
        return result
    }

    /// `reserved.contains`, hashing only a scope of a reserved scope's length: every silent request's scopes are
    /// checked, and hashing a URL-long scope for it was most of the check.
    static func isReserved(_ lowercased: String) -> Bool {
        lengthMask(reservedLengths, has: lowercased) && reserved.contains(lowercased)
    }

    private static let reservedLengths = lengthMask(of: reserved)

    /// `isReserved` of the scope lowercased, lowering only a scope that could be one: a URL scope such as
    /// `https://graph.microsoft.com/User.Read` was lowered, a new string, on every request that named it. ASCII keeps
    /// its length when lowered; other text cannot lower to a reserved name, all ASCII without a `k` (the Kelvin sign
    /// is the one character outside ASCII that lowers into it, to `k`). So a scope of no reserved name's UTF-8
    /// length is none of them.
    static func isReserved(ignoringCase scope: String) -> Bool {
        lengthMask(reservedLengths, has: scope) && isReserved(scope.lowercasedIfNeeded)
    }

    /// The UTF-8 lengths of `names` as bits of a word (64 and over as the top bit).
    static func lengthMask(of names: Set<String>) -> UInt64 {
        names.reduce(0) { $0 | 1 << min(UInt64($1.utf8.count), 63) }
    }

    static func lengthMask(_ mask: UInt64, has text: String) -> Bool {
        mask & 1 << min(UInt64(text.utf8.count), 63) != 0
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
        // Nothing to trim when both ends are printable ASCII: no copy.
        func isPrintableASCII(_ byte: UInt8?) -> Bool { byte.map { $0 > 0x20 && $0 < 0x7F } ?? false }
        if isPrintableASCII(utf8.first), isPrintableASCII(utf8.last) { return self }
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}
