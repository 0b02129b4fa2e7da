import FoundationEssentials

/// An absolute http or https URL, read by Foundation's RFC 3986 parser: the parts brokerd decides on (authorities,
/// endpoints from discovery documents, the hosts requests go to). Characters a URL cannot hold (spaces, non-ASCII)
/// are refused, not percent-encoded behind the caller's back.
public struct HTTPURL: Sendable, Equatable {
    /// "http" or "https", lower-cased.
    public var scheme: String
    /// Lower-cased; an IPv6 address in brackets, as it is written in a URL.
    public var host: String
    public var port: Int?
    /// As written (percent-encoding kept): "" or starting with "/".
    public var path: String
    /// A `?` is present (even with nothing after it).
    public var hasQuery: Bool
    /// A `#` is present (even with nothing after it).
    public var hasFragment: Bool
    /// A user name or password is present (`https://user@host`).
    public var hasUserInfo: Bool

    public init?(_ text: String) {
        guard let url = URL(string: text, encodingInvalidCharacters: false),
              let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = url.host(percentEncoded: true), !host.isEmpty else { return nil }
        self.scheme = scheme
        self.host = host.contains(":") ? "[\(host.lowercased())]" : host.lowercased()
        port = url.port
        path = url.path(percentEncoded: true)
        hasQuery = url.query(percentEncoded: true) != nil
        hasFragment = url.fragment(percentEncoded: true) != nil
        hasUserInfo = url.user(percentEncoded: true) != nil || url.password(percentEncoded: true) != nil
    }

    /// host, or host:port when a port is given.
    public var hostPort: String { port.map { "\(host):\($0)" } ?? host }

    /// scheme://host[:port], without path.
    public var origin: String { "\(scheme)://\(hostPort)" }

    /// The path's segments, empty ones left out.
    public var pathSegments: [String] { path.split(separator: "/").map(String.init) }

    public var isLoopback: Bool { ["127.0.0.1", "localhost", "[::1]"].contains(host) }
}
