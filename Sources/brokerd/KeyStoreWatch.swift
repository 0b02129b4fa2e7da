import BrokerCore
import BrokerPlatform
import Logging
import Systemd

/// What tells the broker that the key store may hold a waiting cache's key again, when the key store is the Secret
/// Service: its name taking a new owner (the old keyring's provider is back, or another took over) and a collection
/// changing (unlocked). SIGHUP and `brokerctl recover` are the other ways; a file key store has only those.
struct KeyStoreWatch {
    private let secretService: SystemEvents?

    /// A provider that has just taken the name may not answer yet, or answer before it has read and unlocked its
    /// keyrings (so without the key): the first try waits a moment, and a try that left a cache waiting is made again
    /// after longer and longer waits, 15 s after the event at the last. A keyring that never had the key (another
    /// took the name) costs a few lookups.
    static let settleDelays: [Int64] = [1, 2, 4, 8]

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
        for delay in settleDelays {
            guard !(await broker.waitingDatabases()).isEmpty else { return }
            try? await broker.clock.sleep(seconds: delay)
            do {
                if try await broker.recoverWaitingCaches().waiting.isEmpty { return }
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
