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

    func run() async throws {
        ProcessHardening.makeNonDumpable()
        ProcessMemory.limitArenas()
        let configPath = config ?? BrokerConfiguration.defaultPath()
        let configuration: BrokerConfiguration
        do {
            configuration = try BrokerConfiguration.load(path: configPath, required: config != nil)
        } catch {
            Self.fail("brokerd: configuration error: \(error)")
        }
        let level = logLevel ?? configuration.logLevel.flatMap(Logger.Level.init(rawValue:)) ?? .info
        let levelBox = LogLevelBox(level)
        bootstrapLogging(levelBox)
        let logger = Logger(label: "brokerd")

        let stateDirectory = self.stateDirectory ?? BrokerConfiguration.defaultStateDirectory()
        if configuration.keyStore != .memory {
            do { try AtomicFile.makeDirectory(stateDirectory, mode: 0o700) } catch {
                Self.fail("brokerd: cannot create the state directory: \(error)")
            }
        }
        let keyChoice: KeyStoreChoice
        do {
            keyChoice = try KeyStoreChoice.choose(configuration.keyStore, keyFile: configuration.keyFile ?? "\(stateDirectory)/cache.key",
                                                  stateDirectory: stateDirectory)
        } catch {
            Self.fail("brokerd: key store: \(error)", status: KeyStoreChoice.unavailableExitStatus)
        }
        let keyStore = keyChoice.keyStore
        for warning in keyChoice.warnings { logger.warning("\(warning)") }
        let store = CacheStore(path: "\(stateDirectory)/cache.db", keyStore: keyStore, reason: keyChoice.reason,
                               leaving: keyChoice.leaving)
        var identity: IdPClient
        do { identity = try IdPClient(settings: Self.identitySettings(configuration)) } catch {
            Self.fail("brokerd: cannot set up HTTPS to identity providers: \(error)")
        }
        let broker = Broker(store: store, writeDelay: .milliseconds(configuration.writeDelayMilliseconds),
                            identity: identity, logger: logger)
        let apps: AppAccess
        do {
            apps = try AppAccess(settings: Self.appSettings(configuration),
                                 databasePath: configuration.keyStore == .memory ? nil : "\(stateDirectory)/apps.db",
                                 retention: Self.auditRetention(configuration), logger: logger,
                                 events: { await broker.publish($0) }, onChange: { broker.forgetRememberedAnswers() })
        } catch {
            Self.fail("brokerd: cannot open the app database \(stateDirectory)/apps.db: \(error)")
        }
        let auditWriter = Task { await apps.runAuditWriter() }
        // Opened, not loaded: cache hits are answered from here on, each reading its own account, while the rest of
        // the cache loads in the background (Broker.open). Other requests wait for the load.
        do { try await broker.open() } catch {
            Self.fail("brokerd: cannot open the cache: \(error)", status: KeyStoreChoice.exitStatus(of: error))
        }
        for note in await store.keyNotes { logger.notice("key store: \(note)") }
        let hooks = await HookRunner.start(broker: broker, settings: configuration.hooks, logger: logger)

        let activated: Int32?
        do { activated = try SocketActivation.listeningUnixSocket() } catch {
            Self.fail("brokerd: socket activation: \(error)")
        }
        let socketPath = activated.flatMap(SocketActivation.boundPath(of:)) ?? SocketLocation.resolve(explicit: socket)
        // Trapped before the socket serves: a SIGTERM sent as soon as the first answer came must stop brokerd
        // gracefully, not kill it with the default action.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint, .sighup)
        let server: BrokerServer
        let dbusState = FrontEndState()
        do {
            server = try await BrokerServer.start(
                broker: broker, apps: apps, socketPath: socketPath, activatedDescriptor: activated, configPath: configPath,
                settings: Self.settings(configuration), dbusBroker: dbusState, logger: logger)
        } catch {
            Self.fail("brokerd: cannot serve \(socketPath): \(error)")
        }

        logger.info("serving", metadata: [
            "socket": "\(socketPath)", "socket_activated": "\(activated != nil)", "key_store": "\(keyStore)",
            "key_store_reason": "\(keyChoice.reason)",
            "pid": "\(getpid())",
        ])
        SystemdNotifier.ready(status: "serving on \(socketPath), loading the cache")
        let loading = Task {
            do { try await broker.finishLoading() } catch {
                Self.fail("brokerd: cannot load the cache: \(error)")
            }
            ProcessMemory.trim()  // the rows read from the database were transient; the heap kept their peak
            let status = await broker.status()
            SystemdNotifier.status("serving \(status.accounts) account(s) on \(socketPath)")
        }

        let serveDBus = dbusBroker ?? configuration.dbusBroker
        if !serveDBus { logger.info("the D-Bus front end is off (dbus_broker = false or --no-dbus-broker)") }
        let dbus = serveDBus ? Self.startDBus(
            broker: broker, apps: apps, state: dbusState, signIn: DBusSignIn(rawValue: configuration.dbusSignIn) ?? .auto, logger: logger) : nil
        let consentNotifications = await ConsentNotifications.start(broker: broker, apps: apps, logger: logger)
        let watchdog = startWatchdog(broker: broker, logger: logger)
        let backgroundRefresh: Task<Void, Never>? = configuration.backgroundRefresh ? Task {
            await broker.runBackgroundRefresh(BackgroundRefreshSettings(
                checkIntervalSeconds: Int64(configuration.refreshCheckIntervalSeconds),
                renewAheadSeconds: Int64(configuration.renewAheadSeconds),
                keepAliveSeconds: Int64(configuration.keepAliveDays) * 86_400,
                firstBackoffSeconds: Int64(configuration.refreshBackoffSeconds)))
        } : nil
        let networkWatch = NetworkWatch.start(broker, logger: logger)
        // Start-up is over once the cache is loaded and the D-Bus front end has started (just above): what it
        // mapped of code and read-only data and will not run again goes (StartupPages).
        let settled = Task {
            await loading.value
            let released = StartupPages.release()
            logger.info("released the start-up pages", metadata: [
                "rss_before_kib": "\(released.residentBefore / 1024)", "rss_after_kib": "\(released.residentAfter / 1024)",
                "mappings": "\(released.mappings)",
            ])
        }
        let statusUpdates = Task {
            await broker.loaded()
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(30))
                let now = await broker.status()
                SystemdNotifier.status("\(now.accounts) account(s), \(server.connectionCount) connection(s), "
                    + "\(server.requestsServed) request(s) served")
            }
        }

        var grace = configuration.shutdownGraceSeconds
        for await signal in signals {
            if signal == .sighup {
                SystemdNotifier.reloading()
                if let reloaded = reload(configPath: configPath, server: server, levelBox: levelBox,
                                         cliLevel: logLevel, current: configuration, logger: logger) {
                    grace = reloaded.shutdownGraceSeconds
                    await apps.update(Self.appSettings(reloaded), retention: Self.auditRetention(reloaded))
                    await hooks.update(reloaded.hooks)
                    // Authorities, CA bundle and sign-in settings apply to the next request.
                    if Self.identitySettings(reloaded) != identity.settings {
                        do {
                            let replacement = try IdPClient(settings: Self.identitySettings(reloaded))
                            let previous = await broker.replaceIdentity(replacement)
                            identity = replacement
                            // Interactive flows started before the reload still use the old one: give them their time.
                            let linger = (previous?.settings.interactiveTimeoutSeconds ?? 0) + 60
                            Task { try? await Task.sleep(for: .seconds(linger)); await previous?.shutdown() }
                        } catch {
                            logger.error("identity provider settings not reloaded: \(error)")
                        }
                    }
                }
                SystemdNotifier.ready(status: "configuration reloaded")
                continue
            }
            logger.info("stopping", metadata: ["signal": "\(signal)"])
            SystemdNotifier.stopping(status: "finishing in-flight requests")
            break
        }
        await loading.value  // the broker's flush needs the whole cache
        await settled.value
        watchdog?.cancel()
        statusUpdates.cancel()
        backgroundRefresh?.cancel()
        networkWatch.stop()
        dbus?.stop()
        consentNotifications?.stop()
        await hooks.stop()
        await server.shutdown(grace: .seconds(grace), removeSocketFile: activated == nil)
        await broker.flush()
        auditWriter.cancel()
        await auditWriter.value
        await apps.close()
        await identity.shutdown()
        logger.info("stopped")
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

    static func settings(_ configuration: BrokerConfiguration) -> ServerSettings {
        ServerSettings(allowRoot: configuration.allowRoot, maxConnections: configuration.maxConnections,
                       maxConnectionsPerProcess: configuration.maxConnectionsPerProcess,
                       idleTimeout: .seconds(Int64(configuration.idleTimeoutSeconds)),
                       maxInFlightPerConnection: configuration.maxRequestsInFlight,
                       maxBatchSize: configuration.maxBatchSize,
                       lineTimeout: .seconds(Int64(configuration.lineTimeoutSeconds)))
    }

    /// The app policy of the configuration (whose values the configuration has checked).
    static func appSettings(_ configuration: BrokerConfiguration) -> AppPolicySettings {
        AppPolicySettings(
            sandboxedApps: AppPolicySettings.Sandboxed(rawValue: configuration.sandboxedApps) ?? .ask,
            unsandboxedApps: AppPolicySettings.Unsandboxed(rawValue: configuration.unsandboxedApps) ?? .allow,
            pins: configuration.pins.map { AppPin(clientId: $0.clientId, apps: $0.apps.compactMap(AppID.init(parsing:))) },
            consentTimeoutSeconds: configuration.consentTimeoutSeconds)
    }

    static func auditRetention(_ configuration: BrokerConfiguration) -> AppAccess.AuditRetention {
        AppAccess.AuditRetention(days: configuration.auditRetentionDays, maximumRows: configuration.auditMaxRows)
    }

    static func identitySettings(_ configuration: BrokerConfiguration) -> IdPClient.Settings {
        var authorities: [String: String] = [:]
        for name in configuration.profiles.keys.sorted() {
            let profile = configuration.profiles[name]!
            if let authority = profile.authority, authorities[profile.clientId] == nil { authorities[profile.clientId] = authority }
        }
        return IdPClient.Settings(
            caFile: configuration.caFile, allowLoopbackHTTP: configuration.allowLoopbackHTTP,
            requestTimeoutSeconds: Int64(configuration.requestTimeoutSeconds),
            connectTimeoutSeconds: Int64(configuration.connectTimeoutSeconds), defaultAuthority: configuration.defaultAuthority, clientAuthorities: authorities,
            openBrowser: BrowserPolicy(rawValue: configuration.openBrowser.rawValue) ?? .auto,
            interactiveTimeoutSeconds: Int64(configuration.interactiveTimeoutSeconds),
            microsoftBaseURL: configuration.microsoftBaseURL, trustedAuthorityHosts: configuration.trustedAuthorityHosts,
            b2cHosts: configuration.b2cHosts, clientCapabilities: configuration.clientCapabilities)
    }

    /// Re-reads the configuration; a broken file leaves the running configuration as it is.
    private func reload(configPath: String, server: BrokerServer, levelBox: LogLevelBox, cliLevel: Logger.Level?,
                        current: BrokerConfiguration, logger: Logger) -> BrokerConfiguration? {
        let updated: BrokerConfiguration
        do { updated = try BrokerConfiguration.load(path: configPath) } catch {
            logger.error("configuration not reloaded: \(error)")
            return nil
        }
        let settings = Self.settings(updated)
        server.update { $0 = settings }
        levelBox.level = cliLevel ?? updated.logLevel.flatMap(Logger.Level.init(rawValue:)) ?? .info
        if updated.keyStore != current.keyStore || updated.keyFile != current.keyFile {
            logger.warning("key_store and key_file changes take effect after a restart")
        }
        logger.info("configuration reloaded", metadata: [
            "path": "\(configPath)", "allow_root": "\(updated.allowRoot)", "max_connections": "\(updated.maxConnections)",
        ])
        return updated
    }

    /// Pings systemd's watchdog at half its interval, but only after a round trip through the broker actor,
    /// so a wedged broker stops the pings and systemd restarts it.
    private func startWatchdog(broker: Broker, logger: Logger) -> Task<Void, Never>? {
        guard let usec = SystemdNotifier.watchdogInterval() else { return nil }
        logger.info("watchdog enabled", metadata: ["interval_ms": "\(usec / 1000)"])
        return Task {
            while !Task.isCancelled {
                if await broker.ping() { SystemdNotifier.watchdogPing() }
                try? await Task.sleep(for: .microseconds(Int64(usec / 2)))
            }
        }
    }

    private static func fail(_ message: String, status: Int32 = 1) -> Never {
        var bytes = Array((message + "\n").utf8)
        bytes.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
        SystemdNotifier.send("STATUS=\(message)")
        Foundation_exit(status)
    }
}

private func Foundation_exit(_ code: Int32) -> Never { exit(code) }

extension Logger.Level: @retroactive ExpressibleByArgument {}
