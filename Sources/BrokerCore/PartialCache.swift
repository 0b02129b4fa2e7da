import BrokerCache
import BrokerStore

/// The cache while the full load runs (`Broker.open` until `finishLoading`): the accounts that cache hits have asked
/// for so far, each read on its own (`AccountRowReader`), plus the rows of no account that an answer needs (app
/// metadata, brokerd's state). A hit on it is the hit the full cache gives: an answer is made from its account's
/// entries, the app metadata and the state only (TokenCache.cachedAccessToken, accountSummary). Anything else waits
/// for the full cache (`Broker.loaded`).
struct PartialCache {
    let reader: AccountRowReader
    private var assembler = CacheAssembler()
    /// Accounts read so far (`CacheStore.account(of:)`), found or not.
    private var read: Set<String> = []

    /// nil when the rows of no account cannot be read: then nothing is answered before the full load.
    init?(reader: AccountRowReader) {
        self.reader = reader
        var ignored: [String] = []  // the full load reports every problem
        for section in [CredentialKind.appMetadata.sectionName, CacheStore.Section.state] {
            guard let loaded = reader.rows(inSection: section) else { return nil }
            for row in loaded.rows { assembler.add(row, problems: &ignored) }
        }
    }

    func hasRead(_ account: String) -> Bool { read.contains(account) }

    /// Adds one account's rows (as `reader` gave them) and returns the cache they make with what was read before.
    mutating func add(_ rows: CacheDatabase.Loaded, of account: String) -> TokenCache {
        var ignored: [String] = []
        for row in rows.rows { assembler.add(row, problems: &ignored) }
        read.insert(account)
        return assembler.finish()  // a copy is finished: the assembler goes on
    }

    var cache: TokenCache { assembler.finish() }
}
