internal import OAuth

/// brokerd's client of identity providers: HTTP, discovery (cached), the token endpoint client, and the settings
/// of interactive sign-in. One per daemon.
public final class IdPClient: Sendable {
    public struct Settings: Sendable, Equatable {
        /// PEM file of CA certificates to trust for HTTPS to identity providers (instead of the system store).
        public var caFile: String?
        /// Accept `http://` authorities on loopback addresses (a local test IdP), never on other hosts.
        public var allowLoopbackHTTP: Bool
        /// Seconds a request to an identity provider may take.
        public var requestTimeoutSeconds: Int64
        /// Seconds to wait for a connection (name resolution included).
        public var connectTimeoutSeconds: Int64
        /// Used when a request names no authority and no profile of the client has one.
        public var defaultAuthority: String?
        /// Authorities by client id (from the configuration's profiles).
        public var clientAuthorities: [String: String]
        /// Whether an interactive sign-in starts the user's browser.
        public var openBrowser: BrowserPolicy
        public var interactiveTimeoutSeconds: Int64
        public var discoveryTTLSeconds: Int64
        /// Where requests to the Microsoft cloud hosts really go (tests: the Entra emulator); the cache keeps
        /// the real host names.
        public var microsoftBaseURL: String?
        /// Hosts trusted as Entra authorities besides Microsoft's own (authority validation).
        public var trustedAuthorityHosts: [String]
        /// Custom domains that serve Azure AD B2C.
        public var b2cHosts: [String]
        /// Client capabilities (e.g. "cp1") sent in `claims` as `xms_cc`.
        public var clientCapabilities: [String]

        public init(caFile: String? = nil, allowLoopbackHTTP: Bool = false, requestTimeoutSeconds: Int64 = 30,
                    connectTimeoutSeconds: Int64 = 3, defaultAuthority: String? = nil,
                    clientAuthorities: [String: String] = [:], openBrowser: BrowserPolicy = .auto,
                    interactiveTimeoutSeconds: Int64 = 600, discoveryTTLSeconds: Int64 = 24 * 3600,
                    microsoftBaseURL: String? = nil, trustedAuthorityHosts: [String] = [], b2cHosts: [String] = [],
                    clientCapabilities: [String] = []) {
            self.caFile = caFile
            self.allowLoopbackHTTP = allowLoopbackHTTP
            self.requestTimeoutSeconds = requestTimeoutSeconds
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.defaultAuthority = defaultAuthority
            self.clientAuthorities = clientAuthorities
            self.openBrowser = openBrowser
            self.interactiveTimeoutSeconds = interactiveTimeoutSeconds
            self.discoveryTTLSeconds = discoveryTTLSeconds
            self.microsoftBaseURL = microsoftBaseURL
            self.trustedAuthorityHosts = trustedAuthorityHosts.map { $0.lowercased() }
            self.b2cHosts = b2cHosts.map { $0.lowercased() }
            self.clientCapabilities = clientCapabilities
        }
    }

    public let settings: Settings
    let transport: HTTPTransport
    let discovery: Discovery
    let instances: InstanceDiscovery
    let tokens: TokenClient

    /// The broker's clock, which the transport's backoff and the discovery caches count on too.
    public let clock: any BrokerClock

    public init(settings: Settings, clock: any BrokerClock = SystemClock()) throws {
        self.settings = settings
        self.clock = clock
        transport = try HTTPTransport(settings: .init(caFile: settings.caFile, allowLoopbackHTTP: settings.allowLoopbackHTTP,
                                                      timeoutSeconds: settings.requestTimeoutSeconds,
                                                      connectTimeoutSeconds: settings.connectTimeoutSeconds),
                                      clock: { clock.elapsed() }, wallClock: { clock.now() })
        discovery = Discovery(transport: transport, ttlSeconds: settings.discoveryTTLSeconds, clock: { clock.elapsed() })
        tokens = TokenClient(transport: transport)
        instances = InstanceDiscovery(transport: transport, ttlSeconds: settings.discoveryTTLSeconds, clock: { clock.elapsed() })
    }

    /// The alias groups instance discovery gives for an Entra authority's cloud (empty for other kinds).
    func aliasGroups(_ authority: Authority) async -> [[String]] {
        guard authority.kind == .entra else { return [] }
        guard let base = HTTPURL(networkURL(authority.url)) else { return [] }
        return await instances.aliasGroups(networkBase: base.origin, host: authority.host)
    }

    public func shutdown() async {
        await transport.shutdown()
    }

    /// The authority a request uses: its own, else the client's configured one, else the default; validated
    /// (an Entra-shaped authority on a host nobody trusts is refused).
    func authority(requested: String?, clientId: String) throws(TokenFailure) -> Authority {
        guard let text = requested ?? settings.clientAuthorities[clientId] ?? settings.defaultAuthority else {
            throw .invalidRequest("no authority: pass 'authority', or configure one for client \(clientId)", reason: .missingAuthority)
        }
        guard let authority = Authority(text, b2cHosts: settings.b2cHosts, trustedHosts: settings.trustedAuthorityHosts) else {
            throw .invalidRequest("'\(text)' is not an authority URL (https://host/tenant)", reason: .invalidAuthority)
        }
        if authority.looksLikeEntra, authority.kind == .oidc {
            throw .invalidRequest("authority validation failed: \(authority.host) is not a Microsoft identity platform host; "
                                  + "add it to trusted_authority_hosts if it is one", reason: .untrustedAuthority)
        }
        do { try transport.check(networkURL(authority.url)) } catch {
            throw .invalidRequest(error.description, reason: .invalidAuthority)
        }
        return authority
    }

    /// The URL requests really go to: the Microsoft hosts mapped to `microsoftBaseURL` when it is set.
    func networkURL(_ url: String) -> String {
        guard let base = settings.microsoftBaseURL, let authority = Authority(url), authority.isMicrosoftHost else { return url }
        return Discovery.normalize(base) + url.dropFirst("https://\(authority.environment)".count)
    }

    func metadata(_ authority: Authority) async throws(TokenFailure) -> ProviderMetadata {
        do { return try await discovery.metadata(for: networkURL(authority.discoveryBase)) } catch {
            switch error {
            case .transient(let why): throw .unavailable(why)
            case .unreachable(let blocked): throw .unavailable(error.description, retryAfter: blocked.retryAfter)
            default: throw .invalidRequest(error.description, reason: .discoveryFailed)
            }
        }
    }
}

extension Broker {
    /// Swaps in new identity-provider settings (SIGHUP); requests already running finish with the old ones.
    public func replaceIdentity(_ replacement: IdPClient) -> IdPClient? {
        defer { identity = replacement }
        return identity
    }
}

