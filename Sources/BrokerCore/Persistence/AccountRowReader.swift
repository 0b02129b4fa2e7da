import BrokerPlatform
import BrokerStore
import Crypto

/// Reads single accounts from the cache database while the whole cache is still loading (`Broker.open`): a cache hit
/// at start-up then costs one account's rows, not the cache's. It has its own connection (the store's is busy with
/// the full load; SQLite's WAL lets both read at once) and is closed once the full load is in place.
public final class AccountRowReader: Sendable {
    private let database: Locked<CacheDatabase?>

    init(path: String, key: SymmetricKey) throws {
        database = Locked(try CacheDatabase(path: path, key: key))
    }

    /// The rows of one account (`CacheStore.account(of:)` names it); nil when they cannot be read (closed, I/O):
    /// the caller then waits for the full load instead.
    func rows(ofAccount account: String) -> CacheDatabase.Loaded? {
        database.withLock { try? $0?.rows(ofAccount: account) }
    }

    /// The rows of one section, as `rows(ofAccount:)`.
    func rows(inSection section: String) -> CacheDatabase.Loaded? {
        database.withLock { try? $0?.rows(inSection: section) }
    }

    func close() {
        database.withLock { database in
            database?.close()
            database = nil
        }
    }
}
