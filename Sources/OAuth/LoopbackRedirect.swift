import NIOCore
import NIOHTTP1
import NIOPosix

/// The redirect target of a browser sign-in (RFC 8252 §7.3): an HTTP listener on 127.0.0.1 and an ephemeral
/// port that takes the first redirect carrying `code` or `error` with the sign-in's own `state`, answers the
/// browser with a short page, and hands the query parameters over.
///
/// Any local process, of any user, can connect to the port: a request without the right `state` gets a 400 page
/// and is otherwise ignored, so it can neither end the sign-in nor inject a code (RFC 6749 §10.12).
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

    public static func start(expectedState: String) async throws -> LoopbackRedirect {
        let (stream, continuation) = AsyncStream<[String: String]>.makeStream()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(RedirectHandler(expectedState: expectedState, continuation: continuation))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw OAuthFailure.configuration("the loopback listener has no port")
        }
        return LoopbackRedirect(port: port, channel: channel, redirects: stream)
    }

    /// The query of the first redirect with `code` or `error` and the expected `state`; nil when the listener was
    /// closed first.
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

    let expectedState: [UInt8]
    let continuation: AsyncStream<[String: String]>.Continuation
    private var query: [String: String]?

    init(expectedState: String, continuation: AsyncStream<[String: String]>.Continuation) {
        self.expectedState = Array(expectedState.utf8)
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
            let answer = received["code"] != nil || received["error"] != nil
            let ours = Self.sameBytes(Array((received["state"] ?? "").utf8), expectedState)
            switch (answer, ours) {
            case (true, true):
                let page = received["error"] != nil
                    ? "Sign-in did not complete. You can close this window and return to the application."
                    : "Signed in. You can close this window and return to the application."
                respond(context, status: .ok, page: page)
                continuation.yield(received)
            case (true, false):
                respond(context, status: .badRequest,
                        page: "This is not the answer to the sign-in brokerd started (its state does not match). Still waiting.")
            case (false, _):
                respond(context, status: .notFound, page: "brokerd is waiting for a sign-in redirect.")
            }
        }
    }

    /// Compares in time independent of where the bytes differ: the state is a secret of the flow.
    private static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
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
