import BrokerJSON

/// What identity providers told brokerd that a later request needs again, kept so that a request the cache can
/// answer never waits on the network, and one that cannot still knows where to go while the network is away:
/// OIDC discovery documents, instance discovery's alias groups, and the tenant id a tenant name stands for.
/// Persisted beside the cache (never exported), each fact with the wall-clock time it was learned: it is used
/// within its lifetime without asking, and past it while the network fails.
public struct NetworkMemory: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        /// A discovery document, by the URL it was fetched from (without `/.well-known/openid-configuration`).
        case discovery
        /// Instance discovery's alias groups for a cloud host (a JSON array of arrays of host names).
        case aliases
        /// The tenant id of a tenant named by its domain, by `environment/tenant-name` (both lower-cased).
        case tenant
    }

    public struct Fact: Sendable, Equatable {
        public var value: String
        /// Unix seconds.
        public var learnedAt: Int64

        public init(value: String, learnedAt: Int64) {
            self.value = value
            self.learnedAt = learnedAt
        }

        /// Whether the fact is younger than `lifetime` at `now` (a fact from the future, after a clock step back,
        /// counts as old: asking again costs one request).
        public func isFresh(now: Int64, lifetime: Int64) -> Bool {
            learnedAt <= now && now - learnedAt < lifetime
        }

        package var json: String {
            JSONWriter().string(.object(JSONObject(["value": .string(value), "learnedAt": .int(learnedAt)])))
        }

        package init?(json: [UInt8]) {
            guard case .object(let object)? = try? JSONReader.parse(json), let value = object["value"]?.stringValue,
                  let learnedAt = object["learnedAt"]?.integerValue else { return nil }
            self.init(value: value, learnedAt: learnedAt)
        }
    }

    /// By `key(kind, subject)`: the row key under which the fact is persisted.
    public private(set) var facts: [String: Fact] = [:]

    public init() {}

    public static func key(_ kind: Kind, _ subject: String) -> String { kind.rawValue + " " + subject }

    /// The kind and subject of a row key; nil for a key this version does not know.
    public static func parse(key: String) -> (kind: Kind, subject: String)? {
        guard let space = key.firstIndex(of: " "), let kind = Kind(rawValue: String(key[..<space])) else { return nil }
        return (kind, String(key[key.index(after: space)...]))
    }

    public func fact(_ kind: Kind, _ subject: String) -> Fact? { facts[Self.key(kind, subject)] }

    /// Stores the fact; returns whether anything changed (a value learned again within the same minute is not a
    /// change worth a write).
    @discardableResult
    public mutating func learn(_ kind: Kind, _ subject: String, value: String, at now: Int64) -> Bool {
        let key = Self.key(kind, subject)
        if let known = facts[key], known.value == value, known.learnedAt <= now, now - known.learnedAt < 60 { return false }
        facts[key] = Fact(value: value, learnedAt: now)
        return true
    }

    package mutating func set(key: String, _ fact: Fact?) { facts[key] = fact }

    // MARK: Tenant names

    public static func tenantSubject(environment: String, tenant: String) -> String {
        environment.lowercasedIfNeeded + "/" + tenant.lowercasedIfNeeded
    }

    /// The tenant id learned for a tenant named by its domain, whatever its age: a domain does not move between
    /// tenants, and every refresh that fetches the tenant's discovery document learns it again.
    public func tenantId(environment: String, tenant: String) -> String? {
        guard !facts.isEmpty else { return nil }
        return fact(.tenant, Self.tenantSubject(environment: environment, tenant: tenant))?.value
    }

    // MARK: Alias groups

    public static func aliasValue(_ groups: [[String]]) -> String {
        JSONWriter().string(.array(groups.map { .array($0.map(JSONValue.string)) }))
    }

    public static func aliasGroups(of fact: Fact) -> [[String]] {
        guard case .array(let groups)? = try? JSONReader.parse(Array(fact.value.utf8)) else { return [] }
        return groups.map { ($0.arrayValue ?? []).compactMap(\.stringValue) }.filter { !$0.isEmpty }
    }
}
