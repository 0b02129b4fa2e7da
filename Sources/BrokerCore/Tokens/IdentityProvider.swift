import OAuth

/// What brokerd needs to talk to identity providers: HTTP, discovery (cached), the token endpoint client, and
/// the settings of interactive sign-in. One per daemon.
public final class IdentityProvider: Sendable {
    public struct Settings: Sendable, Equatable {
        public var http: HTTPTransport.Settings
        /// Used when a request names no authority and no profile of the client has one.
        public var defaultAuthority: String?
        /// Authorities by client id (from the configuration's profiles).
        public var clientAuthorities: [String: String]
        /// `auto` (when a display is present), `always` or `never`.
        public var openBrowser: String
        public var interactiveTimeoutSeconds: Int64
        public var discoveryTTLSeconds: Int64

        public init(http: HTTPTransport.Settings = .init(), defaultAuthority: String? = nil,
                    clientAuthorities: [String: String] = [:], openBrowser: String = "auto",
                    interactiveTimeoutSeconds: Int64 = 600, discoveryTTLSeconds: Int64 = 24 * 3600) {
            self.http = http
            self.defaultAuthority = defaultAuthority
            self.clientAuthorities = clientAuthorities
            self.openBrowser = openBrowser
            self.interactiveTimeoutSeconds = interactiveTimeoutSeconds
            self.discoveryTTLSeconds = discoveryTTLSeconds
        }
    }

    public let settings: Settings
    public let transport: HTTPTransport
    public let discovery: Discovery
    public let tokens: TokenClient

    public init(settings: Settings) throws {
        self.settings = settings
        transport = try HTTPTransport(settings: settings.http)
        discovery = Discovery(transport: transport, ttlSeconds: settings.discoveryTTLSeconds, clock: { Broker.now() })
        tokens = TokenClient(transport: transport)
    }

    public func shutdown() async {
        await transport.shutdown()
    }

    /// The authority a request uses: its own, else the client's configured one, else the default.
    func authority(requested: String?, clientId: String) throws(TokenFailure) -> Authority {
        guard let text = requested ?? settings.clientAuthorities[clientId] ?? settings.defaultAuthority else {
            throw .invalidRequest("no authority: pass 'authority', or configure one for client \(clientId)", reason: "missingAuthority")
        }
        guard let authority = Authority(text) else {
            throw .invalidRequest("'\(text)' is not an authority URL (https://host/tenant)", reason: "invalidAuthority")
        }
        do { try transport.check(authority.url) } catch {
            throw .invalidRequest(error.description, reason: "invalidAuthority")
        }
        return authority
    }

    func metadata(_ authority: Authority) async throws(TokenFailure) -> ProviderMetadata {
        do { return try await discovery.metadata(for: authority.url) } catch {
            switch error {
            case .transient(let why): throw .unavailable(why)
            default: throw .invalidRequest(error.description, reason: "discoveryFailed")
            }
        }
    }
}

extension Broker {
    /// Swaps in new identity-provider settings (SIGHUP); requests already running finish with the old ones.
    public func replaceIdentity(_ replacement: IdentityProvider) -> IdentityProvider? {
        defer { identity = replacement }
        return identity
    }
}

/// An authority URL: `https://host[:port]/tenant[/more]`. `environment` (the cache's host field) is the host
/// with its port when one is given; `tenant` (the cache's realm for tokens without a `tid`) is the first path segment.
public struct Authority: Sendable, Equatable {
    public var url: String
    public var environment: String
    public var tenant: String

    public init?(_ text: String) {
        let trimmed = Discovery.normalize(text.trimmingSpaces)
        guard let schemeEnd = trimmed.firstRange(of: "://") else { return nil }
        let scheme = trimmed[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { return nil }
        let rest = trimmed[schemeEnd.upperBound...]
        let hostPort = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !hostPort.isEmpty, !hostPort.contains("@"), !rest.contains("?"), !rest.contains("#") else { return nil }
        let path = rest.dropFirst(hostPort.count).split(separator: "/")
        url = "\(scheme)://\(hostPort.lowercased())" + path.map { "/" + $0 }.joined()
        environment = hostPort.lowercased()
        tenant = path.first.map(String.init) ?? ""
    }
}
