import BrokerPlatform
import BrokerCore
import BrokerProtocol
import Logging

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

    private let listener: Listener
    private let state: ServerState
    private let router: RequestRouter
    private let logger: Logger
    public let socketPath: String

    private init(listener: Listener, state: ServerState, router: RequestRouter, logger: Logger, socketPath: String) {
        self.listener = listener
        self.state = state
        self.router = router
        self.logger = logger
        self.socketPath = socketPath
    }

    /// Starts serving on `socketPath`, or on `activatedDescriptor` (a listening socket from systemd).
    /// `dbusBroker`: where the daemon reports its D-Bus front end, for `getStatus`.
    /// `apps`: the app policy and audit every token request goes through.
    public static func start(broker: Broker, apps: AppAccess, socketPath: String, activatedDescriptor: Int32?, configPath: String?,
                             settings: ServerSettings, dbusBroker: FrontEndState = FrontEndState(),
                             logger: Logger) async throws -> BrokerServer {
        raiseDescriptorLimit(toServe: settings.maxConnections, logger: logger)
        let state = ServerState(settings: settings, ownUID: getuid())
        let router = RequestRouter(broker: broker, apps: apps, info: DaemonInfo(socketPath: socketPath, socketActivated: activatedDescriptor != nil,
                                                                    configPath: configPath, dbusBroker: dbusBroker),
                                   state: state, logger: logger)
        let descriptor: Int32
        if let activatedDescriptor {
            descriptor = activatedDescriptor
        } else {
            try prepareSocketPath(socketPath)
            descriptor = try Listener.bind(socketPath, backlog: 512)
        }
        let listener = try Listener(listening: descriptor)
        let table = ConnectionTable()
        let started = listener.start(logger: logger) { fd, peer in
            guard let connection = ClientConnection(fd: fd, peer: peer, state: state, router: router, table: table,
                                                    logger: logger) else {
                logger.warning("connection dropped: no descriptor for its wake-ups", metadata: ["errno": "\(errno)"])
                close(fd)
                return
            }
            let verdict = connection.admit()
            guard Threads.start({ connection.run(verdict) }) else {
                logger.warning("connection dropped: no thread for it", metadata: ["errno": "\(errno)"])
                connection.abandon()
                return
            }
        }
        guard started else {
            close(descriptor)
            throw StartError.setup("cannot start the thread that accepts connections")
        }
        return BrokerServer(listener: listener, state: state, router: router, logger: logger, socketPath: socketPath)
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
        var address = Listener.address(path)
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
        let maxConnections = state.settings.withLock { settings in
            change(&settings)
            return settings.maxConnections
        }
        Self.raiseDescriptorLimit(toServe: maxConnections, logger: logger)
    }

    /// Descriptors brokerd needs besides its connections: cache and key files, the listening sockets, connections to
    /// identity providers, sign-in listeners, D-Bus.
    static let ownDescriptors = 256

    /// A connection's socket, the eventfd that wakes its thread, and the pidfd that pins its caller.
    static let descriptorsPerConnection = 3

    /// Raises the soft RLIMIT_NOFILE (up to the hard one) when `maxConnections` would not fit under it: a systemd
    /// user service starts with 1024 soft / 524288 hard, and at the soft limit accept() fails for everyone.
    static func raiseDescriptorLimit(toServe maxConnections: Int, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(RLIMIT_NOFILE_RESOURCE, &limit) == 0 else { return }
        let needed = rlim_t(maxConnections * descriptorsPerConnection + ownDescriptors)
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
        await listener.stop()
        let open = state.startDraining()
        let deadline = ContinuousClock.now + grace
        while state.inFlight > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if state.inFlight > 0 {
            logger.warning("shutting down with requests still running", metadata: ["in_flight": "\(state.inFlight)"])
        }
        for connection in open { connection.inbox.postClose() }
        let closing = ContinuousClock.now + .seconds(1)
        while state.connectionCount > 0, ContinuousClock.now < closing { try? await Task.sleep(for: .milliseconds(5)) }
        router.requestLog.flush()  // the counts of repeated requests whose window is still open
        if removeSocketFile { unlink(socketPath) }
    }
}
