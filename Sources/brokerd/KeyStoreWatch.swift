import BrokerCore
import BrokerPlatform
import Logging
import Systemd

/// What tells the broker that the key store may hold a waiting cache's key again, when the key store is the Secret
/// Service: its name taking a new owner (the old keyring's provider is back, or another took over) and a collection
/// changing (unlocked). SIGHUP and `brokerctl recover` are the other ways; a file key store has only those.
struct KeyStoreWatch {
    private let secretService: SystemEvents?

    /// A provider that has just taken the name may not answer yet: the first try waits a moment, and a try the key
    /// store did not answer is made again a few times.
    static let settleSeconds: Int64 = 1
    static let retries = 3

    static func start(_ broker: Broker, keyStore: KeyStore, logger: Logger) -> KeyStoreWatch {
        guard case .vault = keyStore else { return KeyStoreWatch(secretService: nil) }
        let watched = SystemEvents.watchSecretService({ _ in
            Task { await recover(broker, logger: logger) }
        }, startThread: { PlatformThread.detach($0) })
        switch watched {
        case .success(let watcher):
            return KeyStoreWatch(secretService: watcher)
        case .failure(let failure):
            logger.info("the Secret Service is not watched for a returning key: \(failure)")
            return KeyStoreWatch(secretService: nil)
        }
    }

    private static func recover(_ broker: Broker, logger: Logger) async {
        for _ in 0..<retries {
            guard !(await broker.waitingDatabases()).isEmpty else { return }
            try? await broker.clock.sleep(seconds: settleSeconds)
            do {
                if try await broker.recoverWaitingCaches().problems.isEmpty { return }
            } catch {
                logger.error("the caches waiting for their keys were not merged: \(error)")
                return
            }
        }
    }

    func stop() {
        secretService?.stop()
    }
}
