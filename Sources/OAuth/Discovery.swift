import BrokerJSON

/// The endpoints of an OpenID provider, from its discovery document (OIDC Discovery 1.0 §3, RFC 8414).
public struct ProviderMetadata: Sendable, Equatable {
    public var issuer: String
    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    public var deviceAuthorizationEndpoint: String?
    public var jwksURI: String?
    public var revocationEndpoint: String?
    public var userinfoEndpoint: String?

    public init(issuer: String, authorizationEndpoint: String, tokenEndpoint: String,
                deviceAuthorizationEndpoint: String? = nil, jwksURI: String? = nil, revocationEndpoint: String? = nil,
                userinfoEndpoint: String? = nil) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.jwksURI = jwksURI
        self.revocationEndpoint = revocationEndpoint
        self.userinfoEndpoint = userinfoEndpoint
    }

    init(json body: [UInt8], source: String) throws(OAuthFailure) {
        guard case .object(let object)? = try? JSONReader.parse(body) else {
            throw .invalidResponse("the discovery document at \(source) is not a JSON object")
        }
        func required(_ name: String) throws(OAuthFailure) -> String {
            guard let value = object[name]?.stringValue, !value.isEmpty else {
                throw .invalidResponse("the discovery document at \(source) has no \(name)")
            }
            return value
        }
        self.init(issuer: try required("issuer"), authorizationEndpoint: try required("authorization_endpoint"),
                  tokenEndpoint: try required("token_endpoint"),
                  deviceAuthorizationEndpoint: object["device_authorization_endpoint"]?.stringValue,
                  jwksURI: object["jwks_uri"]?.stringValue, revocationEndpoint: object["revocation_endpoint"]?.stringValue,
                  userinfoEndpoint: object["userinfo_endpoint"]?.stringValue)
    }
}

/// Resolves authorities to provider metadata and keeps the answers for `ttl` seconds.
public actor Discovery {
    private let transport: HTTPTransport
    private let ttl: Int64
    private let clock: @Sendable () -> Int64
    private var cache: [String: (metadata: ProviderMetadata, fetchedAt: Int64)] = [:]
    private var inFlight: [String: Task<ProviderMetadata, Error>] = [:]
    public private(set) var fetches = 0

    public init(transport: HTTPTransport, ttlSeconds: Int64 = 24 * 3600, clock: @escaping @Sendable () -> Int64) {
        self.transport = transport
        self.ttl = ttlSeconds
        self.clock = clock
    }

    /// `authority` without a trailing slash; its discovery document is `<authority>/.well-known/openid-configuration`.
    public func metadata(for authority: String) async throws(OAuthFailure) -> ProviderMetadata {
        let key = Self.normalize(authority)
        if let hit = cache[key], clock() - hit.fetchedAt < ttl { return hit.metadata }
        let task: Task<ProviderMetadata, Error>
        if let running = inFlight[key] {
            task = running
        } else {
            task = Task { try await self.fetch(key) }
            inFlight[key] = task
        }
        do {
            let metadata = try await task.value
            inFlight[key] = nil
            return metadata
        } catch {
            inFlight[key] = nil
            throw (error as? OAuthFailure) ?? .invalidResponse("\(error)")
        }
    }

    public static func normalize(_ authority: String) -> String {
        var text = authority
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }

    private func fetch(_ authority: String) async throws(OAuthFailure) -> ProviderMetadata {
        let url = authority + "/.well-known/openid-configuration"
        let response = try await transport.get(url)
        fetches += 1
        switch response.status {
        case 200:
            let metadata = try ProviderMetadata(json: response.body, source: url)
            for endpoint in [metadata.authorizationEndpoint, metadata.tokenEndpoint] { try transport.check(endpoint) }
            cache[authority] = (metadata, clock())
            return metadata
        case 429, 500...599:
            throw .transient("discovery at \(url) answered HTTP \(response.status)")
        default:
            throw .configuration("no OpenID discovery document at \(url) (HTTP \(response.status)); is the authority right?")
        }
    }
}

/// Microsoft's instance discovery (`<base>/common/discovery/instance?api-version=1.1&authorization_endpoint=…`):
/// which hosts are aliases of one cloud. Answers are kept for the discovery TTL; a failure is remembered briefly.
public actor InstanceDiscovery {
    private let transport: HTTPTransport
    private let ttl: Int64
    private let clock: @Sendable () -> Int64
    private var cache: [String: (groups: [[String]], fetchedAt: Int64)] = [:]

    public init(transport: HTTPTransport, ttlSeconds: Int64, clock: @escaping @Sendable () -> Int64) {
        self.transport = transport
        self.ttl = ttlSeconds
        self.clock = clock
    }

    /// `networkBase`: where to ask (scheme://host[:port]); `host`: the cloud host the authorization endpoint names.
    public func aliasGroups(networkBase: String, host: String) async -> [[String]] {
        let key = networkBase + " " + host
        if let hit = cache[key], clock() - hit.fetchedAt < ttl { return hit.groups }
        let endpoint = "https://\(host)/common/oauth2/v2.0/authorize"
        let url = Discovery.normalize(networkBase) + "/common/discovery/instance?api-version=1.1&authorization_endpoint="
            + FormEncoding.escape(endpoint)
        var groups: [[String]] = []
        if let response = try? await transport.get(url), response.status == 200,
           case .object(let root)? = try? JSONReader.parse(response.body) {
            for entry in root["metadata"]?.arrayValue ?? [] {
                let aliases = (entry.objectValue?["aliases"]?.arrayValue ?? []).compactMap(\.stringValue).map { $0.lowercased() }
                if aliases.count > 1 { groups.append(aliases) }
            }
        }
        // A failure is kept for a minute only, so a network hiccup does not stick for the whole TTL.
        cache[key] = (groups, groups.isEmpty ? clock() - ttl + 60 : clock())
        return groups
    }
}
