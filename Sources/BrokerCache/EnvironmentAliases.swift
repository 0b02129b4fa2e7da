/// Hosts that name the same cloud. MSAL.NET writes `login.windows.net` where msal-python writes
/// `login.microsoftonline.com`; lookups match by group so both find each other's entries.
/// Source: MSAL.NET `KnownMetadataProvider` (see shared/reference/msal-unified-cache.md §2.3).
public struct EnvironmentAliases: Sendable {
    public private(set) var groups: [[String]]
    private var groupOf: [String: String] = [:]

    public static let microsoftClouds: [[String]] = [
        ["login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net"],
        ["login.partner.microsoftonline.cn", "login.chinacloudapi.cn"],
        ["login.microsoftonline.de"],
        ["login.microsoftonline.us", "login.usgovcloudapi.net"],
        ["login-us.microsoftonline.com"],
    ]

    public init(groups: [[String]] = EnvironmentAliases.microsoftClouds) {
        self.groups = []
        for group in groups { add(group) }
    }

    /// Adds an alias group (instance discovery adds the groups it learns); a host already in a group joins it.
    public mutating func add(_ group: [String]) {
        let hosts = group.map { $0.lowercased() }
        guard let first = hosts.first else { return }
        let known = groupOf
        let canonical = hosts.compactMap { known[$0] }.first ?? first
        for host in hosts { groupOf[host] = canonical }
        groups.append(hosts)
    }

    /// The name of the host's group: equal for aliases, the host itself (lower-cased) otherwise.
    public func canonical(_ host: String) -> String {
        let lower = host.lowercased()
        return groupOf[lower] ?? lower
    }

    public func aliases(of host: String) -> [String] {
        let key = canonical(host)
        let members = groupOf.filter { $0.value == key }.map(\.key).sorted()
        return members.isEmpty ? [host.lowercased()] : members
    }
}
