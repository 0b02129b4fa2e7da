import BrokerJSON

/// Resolves authorities to provider metadata and keeps the answers for `ttl` seconds of `clock`, which should be
/// one that a wall-clock step does not move (brokerd passes `Broker.elapsed`).
public actor Discovery {
    private let transport: HTTPTransport
    private let ttl: Int64
    private let clock: @Sendable () -> Int64
    private var cache: [String: (metadata: ProviderMetadata, fetchedAt: Int64)] = [:]
    /// Fetches under way, with how many callers wait for each: the last one to give up (its task cancelled: the app
    /// that asked went away) cancels the fetch, so that a request hanging on a dead network is dropped with it.
    private var inFlight: [String: (task: Task<ProviderMetadata, Error>, waiters: Int)] = [:]
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
            task = running.task
            inFlight[key]?.waiters += 1
        } else {
            task = Task { try await self.fetch(key) }
            inFlight[key] = (task, 1)
        }
        do {
            let metadata = try await withTaskCancellationHandler { try await task.value } onCancel: {
                Task { await self.giveUp(key, task) }
            }
            if inFlight[key]?.task == task { inFlight[key] = nil }
            return metadata
        } catch {
            if inFlight[key]?.task == task { inFlight[key] = nil }
            throw (error as? OAuthFailure) ?? .transient("discovery was cancelled")
        }
    }

    private func giveUp(_ key: String, _ task: Task<ProviderMetadata, Error>) {
        guard let running = inFlight[key], running.task == task else { return }
        if running.waiters > 1 {
            inFlight[key]?.waiters -= 1
        } else {
            inFlight[key] = nil
            task.cancel()
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
