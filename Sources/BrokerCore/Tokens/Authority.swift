import BrokerCache
internal import OAuth

/// An authority URL (SPEC §2): Entra (`https://login.microsoftonline.com/<tenant>`, sovereign clouds), B2C
/// (`https://<t>.b2clogin.com/tfp/<t>/<policy>` or `/<t>/<policy>`), ADFS (`https://<host>/adfs`) or any OIDC issuer.
/// `environment` (the cache's host field) is the host, with its port when one is given; `tenant` is the first path
/// segment (the cache's realm for tokens without a `tid`).
public struct Authority: Sendable, Equatable {
    public enum Kind: String, Sendable { case entra, b2c, adfs, oidc }

    public var url: String
    public var environment: String
    public private(set) var tenant: String
    public private(set) var kind: Kind
    /// Whether the tenant stands for "the account's home tenant" in silent requests (MSAL's rule). Worked out once,
    /// here, as `namesTenantByDomain` is: every cache hit asks both, of an authority its memo keeps.
    public private(set) var isTenantAlias = false
    /// An Entra tenant named by its domain (…/contoso.example): tokens are filed under the tenant id, which the
    /// tenant's discovery document gives (and NetworkMemory remembers).
    public private(set) var namesTenantByDomain = false
    /// The B2C policy (user flow), lower-cased.
    public var policy: String?

    /// The Microsoft identity platform's own hosts (public and sovereign clouds).
    public static let microsoftHosts: Set<String> = Set(EnvironmentAliases.microsoftClouds.joined())
    static let tenantAliases: Set<String> = ["common", "organizations", "consumers"]

    /// The host alone (lower-cased; an IPv6 address in brackets).
    public private(set) var host: String
    public var isMicrosoftHost: Bool { Self.microsoftHosts.contains(host) }

    /// `trustedHosts`: hosts that serve Entra besides Microsoft's own (trusted_authority_hosts).
    public init?(_ text: String, b2cHosts: [String] = [], trustedHosts: [String] = []) {
        guard let parsed = HTTPURL(Discovery.normalize(text.trimmingSpaces)),
              !parsed.hasUserInfo, !parsed.hasQuery, !parsed.hasFragment else { return nil }
        let path = parsed.pathSegments
        url = parsed.origin + path.map { "/" + $0 }.joined()
        environment = parsed.hostPort
        host = parsed.host
        if path.first?.lowercased() == "adfs" {
            kind = .adfs
            tenant = "adfs"
        } else if host.hasSuffix(".b2clogin.com") || b2cHosts.contains(host) || path.first?.lowercased() == "tfp" {
            kind = .b2c
            let parts = path.first?.lowercased() == "tfp" ? Array(path.dropFirst()) : path
            guard parts.count >= 2 else { return nil }
            tenant = parts[0]
            policy = parts[1].lowercased()
        } else if Self.microsoftHosts.contains(host) || trustedHosts.contains(host) {
            kind = .entra
            guard let first = path.first else { return nil }
            tenant = first
        } else {
            kind = .oidc
            tenant = path.first ?? ""
        }
        isTenantAlias = kind == .entra && Self.tenantAliases.contains(tenant.lowercased())
        namesTenantByDomain = kind == .entra && !isTenantAlias && !Self.isGUID(tenant)
    }

    /// A path that names an Entra tenant (common, organizations, consumers or a GUID) and nothing more: on a host
    /// that is not Microsoft's, such an authority is refused unless trusted (authority validation).
    public var looksLikeEntra: Bool {
        let parts = url.split(separator: "/").dropFirst(2)
        guard parts.count == 1, let only = parts.first?.lowercased() else { return false }
        return Self.tenantAliases.contains(only) || Self.isGUID(only)
    }


    /// Where the discovery document hangs: Entra and B2C publish v2.0 metadata under `<authority>/v2.0`.
    public var discoveryBase: String {
        switch kind {
        case .entra, .b2c: return url + "/v2.0"
        case .adfs, .oidc: return url
        }
    }

    /// The same authority for another tenant (silent requests with common/organizations/consumers go to the
    /// account's home tenant).
    public func withTenant(_ other: String) -> Authority {
        guard kind == .entra else { return self }
        // The usual case, a tenant id on Microsoft's host, made in place: parsing the whole URL again (and splitting
        // it by Characters) was most of a hit on /common or /organizations. It gives what the parse would.
        if isMicrosoftHost, Self.isGUID(other) {
            var replaced = self
            replaced.url = url.replacingTenant(tenant, with: other)
            replaced.tenant = other
            replaced.isTenantAlias = false
            replaced.namesTenantByDomain = false
            return replaced
        }
        return Authority(url.replacingTenant(tenant, with: other)) ?? self
    }

    /// The tenant id in an Entra issuer (`https://host/<tenant id>/v2.0`), if it names one.
    static func tenantId(inIssuer issuer: String) -> String? {
        issuer.split(separator: "/").first(where: { isGUID(String($0)) }).map { String($0).lowercased() }
    }

    /// 8-4-4-4-12 hex digits. Read byte by byte: every silent request asks it of its tenant.
    static func isGUID(_ text: String) -> Bool {
        var index = 0
        for byte in text.utf8 {
            defer { index += 1 }
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != UInt8(ascii: "-") { return false }
                continue
            }
            let isHex = (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66)
            if !isHex { return false }
        }
        return index == 36
    }
}

private extension String {
    /// The URL with its first path segment, `tenant`, replaced by `other`. By bytes: the URL is ASCII up to its path.
    func replacingTenant(_ tenant: String, with other: String) -> String {
        var text = self
        return text.withUTF8 { bytes -> String in
            // "scheme://host[:port]/tenant…": the first "/" after "://" starts the path.
            let colon = UInt8(ascii: ":"), slashByte = UInt8(ascii: "/")
            var index = 0
            while index + 2 < bytes.count, !(bytes[index] == colon && bytes[index + 1] == slashByte && bytes[index + 2] == slashByte) {
                index += 1
            }
            guard index + 2 < bytes.count else { return self }
            var slash = index + 3
            while slash < bytes.count, bytes[slash] != slashByte { slash += 1 }
            guard slash < bytes.count else { return self }
            let rest = Swift.min(bytes.count, slash + 1 + tenant.utf8.count)
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[..<slash]), as: UTF8.self) + "/" + other
                + String(decoding: UnsafeBufferPointer(rebasing: bytes[rest...]), as: UTF8.self)
        }
    }
}
