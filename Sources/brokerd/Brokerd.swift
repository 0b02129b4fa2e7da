import BrokerPlatform
import ArgumentParser
import BrokerConfig
import BrokerCore
import BrokerDBus
import BrokerProtocol
import BrokerServer
import Logging
import Systemd
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

@main
struct Brokerd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "brokerd",
        abstract: "The identity broker for Linux: one account and token cache for every app of the user.",
        discussion: """
            Runs in the foreground and serves JSON-RPC 2.0 on a Unix socket. Under systemd it is started by \
            brokerd.socket (socket activation) and logs to the journal; otherwise it binds the socket itself \
            and logs to stderr. SIGTERM stops it gracefully; SIGHUP reloads the configuration file.
            """,
        version: brokerVersion)

    @Option(help: ArgumentHelp("Unix socket to listen on (default: $BROKERD_SOCKET, else $XDG_RUNTIME_DIR/brokerd/brokerd.sock).",
                               valueName: "path"))
    var socket: String?

    @Option(name: .customLong("state-dir"),
            help: ArgumentHelp("Directory of the encrypted cache (default: $STATE_DIRECTORY, else $XDG_STATE_HOME/brokerd).",
                               valueName: "dir"))
    var stateDirectory: String?

    @Option(help: ArgumentHelp("Configuration file (default: $XDG_CONFIG_HOME/brokerd/config.toml).", valueName: "file"))
    var config: String?

    @Option(name: .customLong("log-level"),
            help: "trace, debug, info, notice, warning, error or critical (default: the config's, else info).")
    var logLevel: Logger.Level?

    @Flag(name: .customLong("dbus-broker"), inversion: .prefixedNo,
          help: "Serve com.microsoft.identity.broker1 on the D-Bus session bus, or not (default: the config's dbus_broker, else on).")
    var dbusBroker: Bool?

    /// The command line's settings, which win over the configuration file's (`applied(to:)`, at start and at every
    /// reload): the one place where a flag meets the file.
    struct Flags: Sendable {
        var logLevel: Logger.Level?
        var dbusBroker: Bool?

        func applied(to file: BrokerConfiguration) -> BrokerConfiguration {
            var configuration = file
            if let logLevel { configuration.logLevel = logLevel.rawValue }
            if let dbusBroker { configuration.dbusBroker = dbusBroker }
            return configuration
        }
    }

    func run() async throws {
        ProcessHardening.makeNonDumpable()
        ProcessMemory.limitArenas()
        let flags = Flags(logLevel: logLevel, dbusBroker: dbusBroker)
        let configPath = config ?? BrokerConfiguration.defaultPath()
        let configuration: BrokerConfiguration
        do {
            configuration = flags.applied(to: try BrokerConfiguration.load(path: configPath, required: config != nil))
        } catch {
            Self.fail("brokerd: configuration error: \(error)")
        }
        let levelBox = LogLevelBox(Self.logLevel(configuration))
        bootstrapLogging(levelBox)
        let logger = Logger(label: "brokerd")

        let stateDirectory = self.stateDirectory ?? BrokerConfiguration.defaultStateDirectory()
        let (broker, apps, keyChoice, identity) = await Self.openBroker(configuration, stateDirectory: stateDirectory, logger: logger)
        let hooks = await HookRunner.start(broker: broker, settings: configuration.hooks, logger: logger)
        let activated: Int32?
        do { activated = try SocketActivation.listeningUnixSocket() } catch {
            Self.fail("brokerd: socket activation: \(error)")
        }
        let socketPath = activated.flatMap(SocketActivation.boundPath(of:)) ?? SocketLocation.resolve(explicit: socket)
        let daemon = Daemon(broker: broker, apps: apps, hooks: hooks, logger: logger, levelBox: levelBox, configPath: configPath,
                            flags: flags, keyChoice: keyChoice, configuration: configuration, identity: identity)
        // Trapped before the socket serves: a SIGTERM sent as soon as the first answer came must stop brokerd
        // gracefully, and a SIGHUP reload it, not end it with their default action.
        let terminations = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let socket = await SocketService.start(daemon, socketPath: socketPath, activated: activated)
        // The rest of the cache loads once the socket serves: cache hits are answered meanwhile, each reading its own
        // account (Broker.open), and the first app's answer does not share the CPU with the load's start.
        Task {
            do { try await broker.finishLoading() } catch {
                Self.fail("brokerd: cannot load the cache: \(error)")
            }
            ProcessMemory.trim()  // the rows read from the database were transient; the heap kept their peak
            // A database the key opens beside the one in use is a merge a kill interrupted: it is finished now.
            if !(await broker.waitingDatabases()).isEmpty { _ = try? await broker.recoverWaitingCaches() }
            let waiting = await broker.waitingDatabases()
            if !waiting.isEmpty {
                await DesktopNotifications(logger: logger).show(
                    summary: "Sign-ins kept, waiting for their key",
                    body: "The key store no longer holds the key of \(waiting.count) cache(s); brokerd keeps them and serves a new "
                        + "cache meanwhile. Bring the key store back and run `brokerctl recover`, or see `brokerctl status`.")
            }
            let status = await broker.status()
            SystemdNotifier.status("serving \(status.accounts) account(s) on \(socketPath)")
        }
        let group = DaemonServices.group(daemon, socket: socket, hangups: hangups)
        let shutdown = Task {
            for await signal in terminations {
                logger.info("stopping", metadata: ["signal": "\(signal)"])
                SystemdNotifier.stopping(status: "finishing in-flight requests")
                await group.triggerGracefulShutdown()
                break
            }
        }
        defer { shutdown.cancel() }
        do { try await group.run() } catch {
            logger.error("brokerd stopped on an error: \(error)")
            Self.fail("brokerd: \(error)")
        }
    }

    /// The key store, the cache (opened: hits are answered while the rest loads, `Broker.open`), the IdP client and
    /// the app policy with its database. Any of them failing ends brokerd with a message saying why.
    static func openBroker(_ configuration: BrokerConfiguration, stateDirectory: String, logger: Logger) async
        -> (Broker, AppAccess, KeyStoreChoice, IdPClient) {
        if configuration.keyStore != .memory {
            do { try AtomicFile.makeDirectory(stateDirectory, mode: 0o700) } catch {
                fail("brokerd: cannot create the state directory: \(error)")
            }
        }
        let keyChoice: KeyStoreChoice
        do {
            keyChoice = try KeyStoreChoice.choose(configuration.keyStore, keyFile: configuration.keyFile ?? "\(stateDirectory)/cache.key",
                                                  stateDirectory: stateDirectory)
        } catch {
            fail("brokerd: key store: \(error)", status: KeyStoreChoice.unavailableExitStatus)
        }
        for warning in keyChoice.warnings { logger.warning("\(warning)") }
        let store = CacheStore(path: "\(stateDirectory)/cache.db", keyStore: keyChoice.keyStore, reason: keyChoice.reason,
                               leaving: keyChoice.leaving)
        let clock = SystemClock()
        let identity: IdPClient
        do { identity = try IdPClient(settings: identitySettings(configuration), clock: clock) } catch {
            fail("brokerd: cannot set up HTTPS to identity providers: \(error)")
        }
        let broker = Broker(store: store, writeDelay: .milliseconds(configuration.writeDelayMilliseconds),
                            identity: identity, clock: clock, logger: logger)
        let apps: AppAccess
        do {
            apps = try AppAccess(settings: appSettings(configuration),
                                 databasePath: configuration.keyStore == .memory ? nil : "\(stateDirectory)/apps.db",
                                 retention: auditRetention(configuration), clock: clock, logger: logger,
                                 events: { await broker.publish($0) }, onChange: { broker.forgetRememberedAnswers() })
        } catch {
            fail("brokerd: cannot open the app database \(stateDirectory)/apps.db: \(error)")
        }
        do { try await broker.open() } catch {
            fail("brokerd: cannot open the cache: \(error)", status: KeyStoreChoice.exitStatus(of: error))
        }
        for note in await store.keyNotes { logger.notice("key store: \(note)") }
        return (broker, apps, keyChoice, identity)
    }

    /// The D-Bus front end, when a session bus is there and nobody else owns the name (it is never taken away).
    /// `state` gets what `getStatus.dbusBroker` says.
    static func startDBus(broker: Broker, apps: AppAccess, state: FrontEndState, signIn: DBusSignIn, logger: Logger) -> DBusFrontEnd? {
        let methods = Broker1Methods(broker: broker, apps: apps, version: brokerVersion, logger: logger, signIn: signIn)
        let (service, outcome) = DBusFrontEnd.start(methods: methods, logger: logger)
        let name = DBusFrontEnd.busName
        switch outcome {
        case .serving:
            logger.info("serving on the D-Bus session bus", metadata: ["name": "\(name)"])
            state.set("serving \(name) on the session bus")
        case .nameOwnedByAnother:
            logger.warning("another process owns \(name) on the session bus; serving the socket API only")
            state.set("not serving: another process owns \(name) on the session bus (brokerd never takes it)")
        case .noSessionBus(let why):
            logger.notice("no D-Bus session bus (\(why)); serving the socket API only")
            state.set("not serving: no D-Bus session bus (\(why))")
        case .failed(let why):
            logger.error("the D-Bus front end could not start: \(why); serving the socket API only")
            state.set("not serving: \(why)")
        }
        return service
    }

    static func fail(_ message: String, status: Int32 = 1) -> Never {
        var bytes = Array((message + "\n").utf8)
        bytes.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
        SystemdNotifier.send("STATUS=\(message)")
        Foundation_exit(status)
    }
}

private func Foundation_exit(_ code: Int32) -> Never { exit(code) }

extension Logger.Level: @retroactive ExpressibleByArgument {}
