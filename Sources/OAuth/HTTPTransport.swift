import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOSSL

/// What the broker needs of HTTP: GET a JSON document, POST a form. HTTPS only, except loopback `http://` when
/// the configuration allows it (tests); a private CA bundle can be trusted in addition to the system's.
public final class HTTPTransport: Sendable {
    public struct Settings: Sendable, Equatable {
        /// PEM file of CA certificates to trust (instead of the system store), e.g. a test CA.
        public var caFile: String?
        /// Accept `http://127.0.0.1`, `http://[::1]` and `http://localhost` URLs (never other plain-HTTP hosts).
        public var allowLoopbackHTTP: Bool
        public var timeoutSeconds: Int64
        /// Seconds to wait for a connection (name resolution included): offline, this is what a first request
        /// costs before it fails; later ones fail at once while the host backs off (HostBackoff).
        public var connectTimeoutSeconds: Int64

        public init(caFile: String? = nil, allowLoopbackHTTP: Bool = false, timeoutSeconds: Int64 = 30,
                    connectTimeoutSeconds: Int64 = 3) {
            self.caFile = caFile
            self.allowLoopbackHTTP = allowLoopbackHTTP
            self.timeoutSeconds = timeoutSeconds
            self.connectTimeoutSeconds = connectTimeoutSeconds
        }
    }

    public struct Response: Sendable {
        public var status: Int
        public var body: [UInt8]
        public var headers: [(String, String)]

        public func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    public let settings: Settings
    /// Hosts that could not be reached lately: requests to them fail at once until their backoff ends.
    public let backoff: HostBackoff
    /// Each host's clock against ours, from its answers' `Date` headers.
    public let clocks: HostClocks
    private let client: HTTPClient

    /// `clock`: seconds on a clock that only moves forward, for the backoff; `wallClock`: Unix seconds, to compare
    /// with the hosts' `Date` headers.
    public init(settings: Settings, clock: @escaping @Sendable () -> Int64, wallClock: @escaping @Sendable () -> Int64) throws {
        self.settings = settings
        backoff = HostBackoff(clock: clock)
        clocks = HostClocks(wallClock: wallClock)
        var configuration = HTTPClient.Configuration()
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = settings.caFile { tls.trustRoots = .file(caFile) }
        configuration.tlsConfiguration = tls
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(settings.connectTimeoutSeconds), read: .seconds(settings.timeoutSeconds))
        configuration.httpVersion = .http1Only
        // A refused or unroutable connection is an answer: fail at once, as MSAL's clients do, and let HostBackoff
        // decide when to try again. The pool's default retries it with backoff until `connect`, so an IdP that is
        // down cost every call the whole connect timeout. A connection that gets no answer still waits for it.
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    public func shutdown() async {
        try? await client.shutdown()
    }

    /// Refuses a URL the broker must not talk to: not a valid https URL (or allowed loopback http).
    public func check(_ url: String) throws(OAuthFailure) {
        guard let parsed = HTTPURL(url) else { throw .configuration("\(url) is not a valid https URL") }
        if parsed.scheme == "https" { return }
        guard parsed.isLoopback else { throw .configuration("\(url) is not an https URL") }
        if settings.allowLoopbackHTTP { return }
        throw .configuration("\(url) is plain HTTP; set allow_loopback_http = true to allow it for a local test server")
    }

    /// The host of an absolute URL, lower-cased, without port.
    public static func host(of url: String) -> String? { HTTPURL(url)?.host }

    public func get(_ url: String, headers: [(String, String)] = []) async throws(OAuthFailure) -> Response {
        try check(url)
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        return try await execute(request)
    }

    public func postForm(_ url: String, _ fields: [(String, String)], headers: [(String, String)] = []) async throws(OAuthFailure) -> Response {
        try check(url)
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(string: FormEncoding.encode(fields)))
        return try await execute(request)
    }

    /// The most of an answer that is read: a token response is a few KiB, a discovery document a few tens.
    public static let maxBodyBytes = 4 << 20

    /// The whole exchange, body included, ends by the deadline. AsyncHTTPClient's own deadline stops at the
    /// response head, and its read timeout restarts with every byte: a server dripping its body a byte at a time
    /// would otherwise hold the flow, and the caller, for as long as it likes.
    ///
    /// A host that could not be reached is not tried again until its backoff ends (`backoff`): the request fails at
    /// once with `.unreachable`. Any answer, an error status included, shows the host reachable.
    private func execute(_ request: HTTPClientRequest) async throws(OAuthFailure) -> Response {
        let seconds = settings.timeoutSeconds
        let host = HTTPURL(request.url)?.hostPort ?? request.url
        if let blocked = backoff.blocked(host) { throw .unreachable(blocked) }
        do {
            let response = try await Self.within(.seconds(seconds)) { [client] in
                let response = try await client.execute(request, timeout: .seconds(seconds))
                let body = try await response.body.collect(upTo: Self.maxBodyBytes)
                return Response(status: Int(response.status.code), body: Array(buffer: body),
                                headers: response.headers.map { ($0.name, $0.value) })
            }
            backoff.reached(host)
            clocks.note(host: host, dateHeader: response.header("Date"))
            return response
        } catch is NIOTooManyBytesError {
            backoff.reached(host)
            throw .invalidResponse("the answer from \(host) is larger than \(Self.maxBodyBytes >> 20) MiB")
        } catch let error as HTTPParserError {
            // The host answered, with something that is not HTTP (a header that never ends): this endpoint failed,
            // not the network, and the host's other endpoints must not be held back for it.
            backoff.reached(host)
            throw .transient("the answer from \(host) is not valid HTTP (\(error))")
        } catch where Task.isCancelled {
            // Its caller went away: nothing is known about the host.
            throw .transient("the request to \(host) was cancelled")
        } catch is DeadlineExceeded {
            throw .unreachable(backoff.failed(host, why: "no answer within \(seconds) s"))
        } catch {
            // Connection refused, no route, name resolution, TLS failure, timeout: nothing was decided.
            throw .unreachable(backoff.failed(host, why: Self.describe(error)))
        }
    }

    private struct DeadlineExceeded: Error {}

    /// `work`'s value, or `DeadlineExceeded` once `limit` has passed (`work` is then cancelled and awaited).
    static func within<T: Sendable>(_ limit: Duration, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw DeadlineExceeded() }
            return value
        }
    }

    private static func describe(_ error: Error) -> String {
        if let error = error as? HTTPClientError, error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            return "timed out"
        }
        return "\(error)"
    }
}
