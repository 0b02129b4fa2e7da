import NIOCore
import NIOHTTP1
import NIOPosix

/// The redirect target of a browser sign-in (RFC 8252 §7.3): an HTTP listener on 127.0.0.1 and an ephemeral
/// port that takes the first redirect carrying `code` or `error`, answers the browser with a short page,
/// and hands the query parameters over.
public final class LoopbackRedirect: Sendable {
    public let port: Int
    private let channel: Channel
    private let redirects: AsyncStream<[String: String]>

    public var redirectURI: String { "http://127.0.0.1:\(port)/" }

    private init(port: Int, channel: Channel, redirects: AsyncStream<[String: String]>) {
        self.port = port
        self.channel = channel
        self.redirects = redirects
    }

    public static func start() async throws -> LoopbackRedirect {
        let (stream, continuation) = AsyncStream<[String: String]>.makeStream()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(RedirectHandler(continuation: continuation))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw OAuthFailure.configuration("the loopback listener has no port")
        }
        return LoopbackRedirect(port: port, channel: channel, redirects: stream)
    }

    /// The query of the first redirect with `code` or `error`; nil when the listener was closed first.
    public func nextRedirect() async -> [String: String]? {
        for await query in redirects { return query }
        return nil
    }

    public func close() async {
        try? await channel.close()
    }
}

private final class RedirectHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let continuation: AsyncStream<[String: String]>.Continuation
    private var query: [String: String]?

    init(continuation: AsyncStream<[String: String]>.Continuation) {
        self.continuation = continuation
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            let parts = head.uri.split(separator: "?", maxSplits: 1)
            query = parts.count == 2 ? FormEncoding.decode(parts[1]) : [:]
        case .body:
            break
        case .end:
            let received = query ?? [:]
            let relevant = received["code"] != nil || received["error"] != nil
            let page: String
            if received["error"] != nil {
                page = "Sign-in did not complete. You can close this window and return to the application."
            } else if relevant {
                page = "Signed in. You can close this window and return to the application."
            } else {
                page = "brokerd is waiting for a sign-in redirect."
            }
            respond(context, status: relevant ? .ok : .notFound, page: page)
            if relevant { continuation.yield(received) }
        }
    }

    private func respond(_ context: ChannelHandlerContext, status: HTTPResponseStatus, page: String) {
        let html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>brokerd</title></head><body><p>\(page)</p></body></html>"
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(html.utf8.count)")
        headers.add(name: "Connection", value: "close")
        headers.add(name: "Cache-Control", value: "no-store")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: html)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
