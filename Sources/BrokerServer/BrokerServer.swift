import BrokerCore
import BrokerProtocol
import Logging
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc

/// RLIMIT_NOFILE as getrlimit/setrlimit take it (glibc declares it as an enum, which Swift imports as a struct).
private let RLIMIT_NOFILE_RESOURCE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#endif

/// The JSON-RPC server on a Unix socket: binds (or adopts systemd's socket), serves, and stops gracefully.
public final class BrokerServer: Sendable {
    public enum StartError: Error, CustomStringConvertible {
        case alreadyServed(String)
        case notASocket(String)
        case setup(String)

        public var description: String {
            switch self {
            case .alreadyServed(let path): return "another brokerd is already serving \(path)"
            case .notASocket(let path): return "\(path) exists and is not a socket; refusing to replace it"
            case .setup(let message): return message
            }
        }
    }

    private let group: MultiThreadedEventLoopGroup
    private let state: ServerState
    private let router: RequestRouter
    private let logger: Logger
    private let serverChannel: Channel
    public let socketPath: String

    private init(group: MultiThreadedEventLoopGroup, state: ServerState, router: RequestRouter, logger: Logger,
                 serverChannel: Channel, socketPath: String) {
        self.group = group
        self.state = state
        self.router = router
        self.logger = logger
        self.serverChannel = serverChannel
        self.socketPath = socketPath
    }

    /// Starts serving on `socketPath`, or on `activatedDescriptor` (a listening socket from systemd).
    /// `dbusBroker`: where the daemon reports its D-Bus front end, for `getStatus`.
    public static func start(broker: Broker, socketPath: String, activatedDescriptor: Int32?, configPath: String?,
                             settings: ServerSettings, dbusBroker: FrontEndState = FrontEndState(),
                             logger: Logger) async throws -> BrokerServer {
        // One event loop. Two (one per core) would answer cache hits of many clients on both cores, but made the
        // refusal of another user's connection reach the client only some of the time (PeerCredentialTests): the
        // peer-credential check and the refusal need a look before that is turned on.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // The connection table is confined to that one loop: a second loop would need a table per loop or a lock.
        let table = NIOLoopBoundBox.makeBoxSendingValue(ConnectionTable(), eventLoop: group.next())
        raiseDescriptorLimit(toServe: settings.maxConnections, logger: logger)
        let state = ServerState(settings: settings, ownUID: getuid())
        let router = RequestRouter(broker: broker, info: DaemonInfo(socketPath: socketPath, socketActivated: activatedDescriptor != nil,
                                                                    configPath: configPath, dbusBroker: dbusBroker),
                                   state: state, logger: logger)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 512)
            .childChannelOption(ChannelOptions.autoRead, value: false)
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            // Past the high mark the channel is unwritable and brokerd stops reading from it (ConnectionHandler):
            // a client that does not read its answers holds at most this much of them, plus its running requests'.
            .childChannelOption(ChannelOptions.writeBufferWaterMark, value: .init(low: 64 * 1024, high: 256 * 1024))
            .childChannelInitializer { channel in
                let idle = state.settings.withLockedValue { $0.idleTimeout }
                return channel.eventLoop.makeCompletedFuture {
                    let handler = ConnectionHandler(state: state, router: router, table: table.value, logger: logger)
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idle))
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        do {
            let channel: Channel
            if let fd = activatedDescriptor {
                channel = try await bootstrap.withBoundSocket(fd).get()
            } else {
                try prepareSocketPath(socketPath)
                let previous = umask(0o177)
                defer { umask(previous) }
                channel = try await bootstrap.bind(unixDomainSocketPath: socketPath, cleanupExistingSocketFile: false).get()
                chmod(socketPath, 0o600)
            }
            return BrokerServer(group: group, state: state, router: router, logger: logger,
                                serverChannel: channel, socketPath: socketPath)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Creates the socket's directory (0700) if missing and clears a stale socket; refuses if a live brokerd
    /// answers there or the path is something other than a socket.
    static func prepareSocketPath(_ path: String) throws {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw StartError.setup("socket path is too long for AF_UNIX: \(path)")
        }
        let directory = AtomicFile.parentDirectory(of: path)
        do { try AtomicFile.makeDirectory(directory, mode: 0o700) } catch {
            throw StartError.setup("cannot create the socket directory: \(error)")
        }
        // Another user must not own or be able to write the directory (a /tmp fallback could be pre-created):
        // they could replace the socket with their own and receive every app's requests.
        var directoryInfo = stat()
        guard lstat(directory, &directoryInfo) == 0, directoryInfo.st_mode & S_IFMT == S_IFDIR else {
            throw StartError.setup("\(directory) is not a directory")
        }
        guard directoryInfo.st_uid == getuid(), directoryInfo.st_mode & 0o022 == 0 else {
            throw StartError.setup("\(directory) belongs to another user or is writable by others; refusing to serve there")
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFSOCK else { throw StartError.notASocket(path) }
        if isServed(path) { throw StartError.alreadyServed(path) }
        unlink(path)
    }

    /// Whether something accepts connections on the socket at `path`.
    static func isServed(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes.prefix(raw.count - 1))
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    public var connectionCount: Int { state.connectionCount }
    public var requestsServed: Int { state.requestsServed }

    public func update(_ change: @Sendable (inout ServerSettings) -> Void) {
        let maxConnections = state.settings.withLockedValue { settings in
            change(&settings)
            return settings.maxConnections
        }
        Self.raiseDescriptorLimit(toServe: maxConnections, logger: logger)
    }

    /// Descriptors brokerd needs besides its connections: cache and key files, the listening sockets, connections to
    /// identity providers, sign-in listeners, D-Bus.
    static let ownDescriptors = 256

    /// Raises the soft RLIMIT_NOFILE (up to the hard one) when `maxConnections` would not fit under it: a systemd
    /// user service starts with 1024 soft / 524288 hard, and at the soft limit accept() fails for everyone.
    static func raiseDescriptorLimit(toServe maxConnections: Int, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(RLIMIT_NOFILE_RESOURCE, &limit) == 0 else { return }
        let needed = rlim_t(maxConnections + ownDescriptors)
        guard limit.rlim_cur < needed else { return }
        let previous = limit.rlim_cur
        limit.rlim_cur = limit.rlim_max
        guard setrlimit(RLIMIT_NOFILE_RESOURCE, &limit) == 0 else { return }
        logger.debug("raised the open file limit", metadata: ["from": "\(previous)", "to": "\(limit.rlim_cur)"])
        if limit.rlim_cur < needed {
            logger.warning("the open file limit is lower than max_connections needs", metadata: [
                "limit": "\(limit.rlim_cur)", "max_connections": "\(maxConnections)",
            ])
        }
    }

    /// Stops accepting, lets in-flight requests finish for at most `grace`, then closes every connection.
    /// The socket file is removed unless it belongs to systemd (socket activation).
    public func shutdown(grace: Duration, removeSocketFile: Bool) async {
        try? await serverChannel.close()
        let open = state.startDraining()
        let deadline = ContinuousClock.now + grace
        while state.inFlight > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if state.inFlight > 0 {
            logger.warning("shutting down with requests still running", metadata: ["in_flight": "\(state.inFlight)"])
        }
        for channel in open { try? await channel.close() }
        router.requestLog.flush()  // the counts of repeated requests whose window is still open
        if removeSocketFile { unlink(socketPath) }
        try? await group.shutdownGracefully()
    }
}
