import BrokerConfig
import BrokerCore
import BrokerDBus
import BrokerPlatform
import BrokerServer
import Logging
import ServiceLifecycle
import Systemd
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// What the services of a running brokerd share: the parts made at start-up, and what a reload changes.
final class Daemon: Sendable {
    let broker: Broker
    let apps: AppAccess
    let hooks: HookRunner
    let logger: Logger
    let levelBox: LogLevelBox
    let configPath: String
    let flags: Brokerd.Flags
    let keyStore: KeyStore
    let keyStoreReason: String
    /// The configuration in force (the file's as last loaded, flags applied) and the IdP client made from it.
    let current: Locked<(configuration: BrokerConfiguration, identity: IdPClient)>
    /// What `getStatus.dbusBroker` says (set by the D-Bus service).
    let dbusState = FrontEndState()
    /// The socket server, once SocketService has started it.
    let server = Locked<BrokerServer?>(nil)

    init(broker: Broker, apps: AppAccess, hooks: HookRunner, logger: Logger, levelBox: LogLevelBox, configPath: String,
         flags: Brokerd.Flags, keyChoice: KeyStoreChoice, configuration: BrokerConfiguration, identity: IdPClient) {
        (self.broker, self.apps, self.hooks, self.logger, self.levelBox) = (broker, apps, hooks, logger, levelBox)
        (keyStore, keyStoreReason) = (keyChoice.keyStore, keyChoice.reason)
        (self.configPath, self.flags) = (configPath, flags)
        current = Locked((configuration, identity))
    }

    var configuration: BrokerConfiguration { current.withLock { $0.configuration } }
}

/// The daemon as services of one ServiceGroup (swift-service-lifecycle). A graceful shutdown (SIGTERM or SIGINT:
/// `Brokerd.run` traps them before the socket serves and triggers it) stops the services one by one in the reverse of
/// this order, so that requests in flight finish (the socket) before the cache is flushed and the databases close
/// (the core, first here and last to stop).
enum DaemonServices {
    static func group(_ daemon: Daemon, socket: SocketService, hangups: UnixSignalsSequence) -> ServiceGroup {
        let services: [any Service] = [
            CoreService(daemon: daemon), socket, DBusService(daemon: daemon), HooksService(daemon: daemon),
            BackgroundRefreshService(daemon: daemon), NetworkWatchService(daemon: daemon), KeyStoreWatchService(daemon: daemon),
            WatchdogService(daemon: daemon),
            StatusService(daemon: daemon), StartupPagesService(daemon: daemon), ReloadService(daemon: daemon, hangups: hangups),
        ]
        // Every service runs until the shutdown (one with nothing left to do waits for it): the group takes a service
        // that ends while the others stop one by one for one that failed.
        let configurations = services.map {
            ServiceGroupConfiguration.ServiceConfiguration(service: $0, successTerminationBehavior: .gracefullyShutdownGroup,
                                                           failureTerminationBehavior: .gracefullyShutdownGroup)
        }
        var groupLogger = daemon.logger
        groupLogger[metadataKey: "component"] = "lifecycle"
        return ServiceGroup(configuration: .init(services: configurations, logger: groupLogger))
    }
}

/// The broker's persistence and the app database: at shutdown, last of all, the cache is flushed (once loaded), the
/// queued audit written and the databases closed.
struct CoreService: Service {
    let daemon: Daemon

    func run() async throws {
        let apps = daemon.apps
        let auditWriter = Task { await apps.runAuditWriter() }
        try? await gracefulShutdown()
        await daemon.broker.loaded()  // the flush needs the whole cache
        await daemon.broker.flush()
        auditWriter.cancel()
        await auditWriter.value
        await apps.close()
        await daemon.current.withLock { $0.identity }.shutdown()
        daemon.logger.info("stopped")
    }
}

/// The Unix socket, serving since start-up (`start`, before the other services: the first app's answer does not wait
/// for them); at shutdown, requests in flight get `shutdown_grace` to finish.
struct SocketService: Service {
    let daemon: Daemon
    let server: BrokerServer
    /// Whether the socket's file is brokerd's to remove (not when systemd passed the socket).
    let removeSocketFile: Bool

    /// Starts serving `socketPath` (or the socket systemd passed, `activated`).
    static func start(_ daemon: Daemon, socketPath: String, activated: Int32?) async -> SocketService {
        let server: BrokerServer
        do {
            server = try await BrokerServer.start(
                broker: daemon.broker, apps: daemon.apps, socketPath: socketPath, activatedDescriptor: activated,
                configPath: daemon.configPath, settings: Brokerd.settings(daemon.configuration), dbusBroker: daemon.dbusState,
                logger: daemon.logger)
        } catch {
            Brokerd.fail("brokerd: cannot serve \(socketPath): \(error)")
        }
        daemon.server.withLock { $0 = server }
        daemon.logger.info("serving", metadata: [
            "socket": "\(socketPath)", "socket_activated": "\(activated != nil)", "key_store": "\(daemon.keyStore)",
            "key_store_reason": "\(daemon.keyStoreReason)", "pid": "\(getpid())",
        ])
        SystemdNotifier.ready(status: "serving on \(socketPath), loading the cache")
        return SocketService(daemon: daemon, server: server, removeSocketFile: activated == nil)
    }

    func run() async throws {
        try? await gracefulShutdown()
        await server.shutdown(grace: .seconds(daemon.configuration.shutdownGraceSeconds), removeSocketFile: removeSocketFile)
    }
}

/// The com.microsoft.identity.broker1 front end and the consent notifications on the session bus.
struct DBusService: Service {
    let daemon: Daemon

    func run() async throws {
        let configuration = daemon.configuration
        let dbus: DBusFrontEnd?
        if configuration.dbusBroker {
            dbus = Brokerd.startDBus(broker: daemon.broker, apps: daemon.apps, state: daemon.dbusState,
                                     signIn: DBusSignIn(rawValue: configuration.dbusSignIn) ?? .auto, logger: daemon.logger)
        } else {
            daemon.logger.info("the D-Bus front end is off (dbus_broker = false or --no-dbus-broker)")
            dbus = nil
        }
        let consentNotifications = await ConsentNotifications.start(broker: daemon.broker, apps: daemon.apps, logger: daemon.logger)
        try? await gracefulShutdown()
        dbus?.stop()
        consentNotifications?.stop()
    }
}

/// The configured hook commands: at shutdown, the running ones are ended.
struct HooksService: Service {
    let daemon: Daemon

    func run() async throws {
        try? await gracefulShutdown()
        await daemon.hooks.stop()
    }
}

struct BackgroundRefreshService: Service {
    let daemon: Daemon

    func run() async throws {
        let configuration = daemon.configuration
        guard configuration.backgroundRefresh else {
            try? await gracefulShutdown()
            return
        }
        let broker = daemon.broker
        let settings = BackgroundRefreshSettings(
            checkInterval: .milliseconds(configuration.refreshCheckIntervalMilliseconds),
            renewAheadSeconds: Int64(configuration.renewAheadSeconds),
            keepAliveSeconds: Int64(configuration.keepAliveDays) * 86_400,
            firstBackoffSeconds: Int64(configuration.refreshBackoffSeconds))
        await cancelWhenGracefulShutdown { await broker.runBackgroundRefresh(settings) }
    }
}

/// What tells the broker that the network is back (NetworkWatch).
/// Merges the caches waiting for their keys when the Secret Service changes (KeyStoreWatch).
struct KeyStoreWatchService: Service {
    let daemon: Daemon

    func run() async throws {
        let watch = KeyStoreWatch.start(daemon.broker, keyStore: daemon.keyStore, logger: daemon.logger)
        try? await gracefulShutdown()
        watch.stop()
    }
}

struct NetworkWatchService: Service {
    let daemon: Daemon

    func run() async throws {
        let watch = NetworkWatch.start(daemon.broker, logger: daemon.logger)
        try? await gracefulShutdown()
        watch.stop()
    }
}

/// Pings systemd's watchdog at half its interval, but only after a round trip through the broker actor, so a
/// wedged broker stops the pings and systemd restarts it. Nothing to do when systemd asked for no watchdog.
struct WatchdogService: Service {
    let daemon: Daemon

    func run() async throws {
        guard let usec = SystemdNotifier.watchdogInterval() else {
            try? await gracefulShutdown()
            return
        }
        daemon.logger.info("watchdog enabled", metadata: ["interval_ms": "\(usec / 1000)"])
        let broker = daemon.broker
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                if await broker.ping() { SystemdNotifier.watchdogPing() }
                try? await Task.sleep(for: .microseconds(Int64(usec / 2)))
            }
        }
    }
}

/// systemd's status line: accounts, connections and requests, every 30 s once the cache is loaded.
struct StatusService: Service {
    let daemon: Daemon

    func run() async throws {
        let daemon = self.daemon
        await cancelWhenGracefulShutdown {
            await daemon.broker.loaded()
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(30))
                let now = await daemon.broker.status()
                guard let server = daemon.server.withLock({ $0 }) else { continue }
                SystemdNotifier.status("\(now.accounts) account(s), \(server.connectionCount) connection(s), "
                    + "\(server.requestsServed) request(s) served")
            }
        }
    }
}

/// Start-up is over once the cache is loaded and the front ends have started: what start-up mapped of code and
/// read-only data and will not run again goes (StartupPages).
struct StartupPagesService: Service {
    let daemon: Daemon

    func run() async throws {
        await daemon.broker.loaded()
        let released = StartupPages.release()
        daemon.logger.info("released the start-up pages", metadata: [
            "rss_before_kib": "\(released.residentBefore / 1024)", "rss_after_kib": "\(released.residentAfter / 1024)",
            "mappings": "\(released.mappings)",
        ])
        try? await gracefulShutdown()
    }
}

/// SIGHUP: the configuration file again, flags over it (Brokerd.Flags), applied to the running parts; a broken file
/// leaves the running configuration as it is.
struct ReloadService: Service {
    let daemon: Daemon
    /// SIGHUP, trapped before the socket serves (its default action would end brokerd).
    let hangups: UnixSignalsSequence

    func run() async throws {
        let hangups = self.hangups
        await cancelWhenGracefulShutdown {
            for await _ in hangups { await reload() }
        }
    }

    private func reload() async {
        SystemdNotifier.reloading()
        defer { SystemdNotifier.ready(status: "configuration reloaded") }
        let (logger, previous) = (daemon.logger, daemon.configuration)
        let updated: BrokerConfiguration
        do { updated = daemon.flags.applied(to: try BrokerConfiguration.load(path: daemon.configPath)) } catch {
            logger.error("configuration not reloaded: \(error)")
            return
        }
        let settings = Brokerd.settings(updated)
        daemon.server.withLock { $0 }?.update { $0 = settings }
        daemon.levelBox.level = Brokerd.logLevel(updated)
        if updated.keyStore != previous.keyStore || updated.keyFile != previous.keyFile {
            logger.warning("key_store and key_file changes take effect after a restart")
        }
        logger.info("configuration reloaded", metadata: [
            "path": "\(daemon.configPath)", "allow_root": "\(updated.allowRoot)", "max_connections": "\(updated.maxConnections)",
        ])
        await daemon.apps.update(Brokerd.appSettings(updated), retention: Brokerd.auditRetention(updated))
        await daemon.hooks.update(updated.hooks)
        daemon.current.withLock { $0.configuration = updated }
        // A key store that changed may hold a waiting cache's key again, or have come up empty (it gets the key in use).
        do { _ = try await daemon.broker.recoverWaitingCaches() } catch {
            logger.error("the caches waiting for their keys were not merged: \(error)")
        }
        // Authorities, CA bundle and sign-in settings apply to the next request.
        let identity = daemon.current.withLock { $0.identity }
        guard Brokerd.identitySettings(updated) != identity.settings else { return }
        do {
            let replacement = try IdPClient(settings: Brokerd.identitySettings(updated), clock: daemon.broker.clock)
            let replaced = await daemon.broker.replaceIdentity(replacement)
            daemon.current.withLock { $0.identity = replacement }
            // Interactive flows started before the reload still use the old one: give them their time.
            let linger = (replaced?.settings.interactiveTimeoutSeconds ?? 0) + 60
            Task { try? await Task.sleep(for: .seconds(linger)); await replaced?.shutdown() }
        } catch {
            logger.error("identity provider settings not reloaded: \(error)")
        }
    }
}

