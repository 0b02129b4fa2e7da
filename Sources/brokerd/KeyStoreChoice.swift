import BrokerPlatform
import BrokerConfig
import BrokerCore
import SecretService

#if canImport(Glibc)
import Glibc
#endif

/// The cache key's store: what `key_store` asks for, as the session bus allows it, and why.
///
/// `auto` takes the Secret Service when one is reachable on the session bus (owned, or activatable) and can keep
/// the key, else the key file; the reason is in status and the log either way. An explicit `secret-service`
/// that cannot be reached is an error, never a fallback.
struct KeyStoreChoice {
    var keyStore: KeyStore
    var reason: String
    /// The vault the key moves out of (the file store chosen while the Secret Service holds brokerd's key).
    var leaving: (any KeyVault)?
    /// For the log: what was found on the way that the user should know.
    var warnings: [String] = []

    /// brokerd's exit status when the Secret Service cannot be used (unreachable, locked, no collection): EX_TEMPFAIL,
    /// so that a unit can tell it from other failures (RestartPreventExitStatus=75: no restart loop that shows an
    /// unlock prompt again and again; the next request, through socket activation, tries again).
    static let unavailableExitStatus: Int32 = 75

    static func exitStatus(of failure: any Error) -> Int32 {
        switch failure as? KeyStore.Failure {
        case .vault?, .vaultKeySize?: return unavailableExitStatus
        default: return 1
        }
    }

    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    typealias Setting = BrokerConfiguration.KeyStoreSetting

    static func choose(_ setting: Setting, keyFile: String, stateDirectory: String) throws(Refusal) -> KeyStoreChoice {
        let configured = "key_store = \"\(setting.rawValue)\" in the config"
        switch setting {
        case .memory:
            return KeyStoreChoice(keyStore: .memory, reason: configured)
        case .file:
            return chooseFile(keyFile: keyFile, stateDirectory: stateDirectory, reason: configured)
        case .secretService:
            if case .unreachable(let why) = SecretServiceKeyring.reachability() {
                throw Refusal(description: "key_store = \"secret-service\", but no Secret Service is reachable on the session "
                    + "bus (\(why)); start one (gnome-keyring, KWallet, KeePassXC) or set key_store = \"file\"")
            }
            let keyring = SecretServiceKeyVault.keyring(stateDirectory: stateDirectory)
            do {
                let vault = SecretServiceKeyVault(keyring: keyring, program: try keyring.program())
                return KeyStoreChoice(keyStore: .vault(vault, keyFile: keyFile), reason: configured)
            } catch {
                throw Refusal(description: "key_store = \"secret-service\", but \(error)")
            }
        case .auto:
            return try chooseAutomatically(keyFile: keyFile, stateDirectory: stateDirectory)
        }
    }

    private static func chooseAutomatically(keyFile: String, stateDirectory: String) throws(Refusal) -> KeyStoreChoice {
        if case .unreachable(let why) = SecretServiceKeyring.reachability() {
            return KeyStoreChoice(keyStore: .file(path: keyFile), reason: "no Secret Service on the session bus (\(why))")
        }
        let keyring = SecretServiceKeyVault.keyring(stateDirectory: stateDirectory)
        let inspection: SecretServiceKeyring.Inspection
        do { inspection = try keyring.inspect() } catch {
            // It may hold the key: a new key file would leave the cache unreadable.
            if !AtomicFile.exists(keyFile) && AtomicFile.exists("\(stateDirectory)/cache.db") {
                throw Refusal(description: "key_store = \"auto\": \(error); brokerd makes no new key while the Secret Service "
                    + "may hold the cache's; fix it, or set key_store = \"file\" (or \"secret-service\") to choose")
            }
            let reason = "the Secret Service on the session bus did not answer (\(error))"
            return KeyStoreChoice(keyStore: .file(path: keyFile), reason: reason, warnings: ["key store: file, because \(reason)"])
        }
        let vault = SecretServiceKeyVault(keyring: keyring, program: inspection.program)
        if !inspection.holdsSecret, let why = inspection.cannotStore {
            let reason = "the Secret Service on the session bus (\(inspection.program)) cannot take the key: \(why)"
            return KeyStoreChoice(keyStore: .file(path: keyFile), reason: reason, warnings: ["key store: file, because \(reason)"])
        }
        return KeyStoreChoice(keyStore: .vault(vault, keyFile: keyFile),
                              reason: "chosen automatically: a Secret Service is on the session bus")
    }

    /// The key file; a key the Secret Service holds for this state directory moves into it.
    private static func chooseFile(keyFile: String, stateDirectory: String, reason: String) -> KeyStoreChoice {
        var choice = KeyStoreChoice(keyStore: .file(path: keyFile), reason: reason)
        if case .unreachable = SecretServiceKeyring.reachability() { return choice }
        let keyring = SecretServiceKeyVault.keyring(stateDirectory: stateDirectory)
        do {
            let inspection = try keyring.inspect()
            if inspection.holdsSecret { choice.leaving = SecretServiceKeyVault(keyring: keyring, program: inspection.program) }
        } catch {
            choice.warnings.append("key store: could not look for a key to move out of the Secret Service: \(error)")
        }
        return choice
    }
}

/// The Secret Service as BrokerCore's KeyVault: one item per state directory, labelled "brokerd cache key".
struct SecretServiceKeyVault: KeyVault {
    let keyring: SecretServiceKeyring
    let program: String

    var kind: String { "secret-service" }
    var location: String { "\(program) on the session bus" }

    /// The item's attributes: brokerd's, and this state directory's (another state directory has another key).
    static func keyring(stateDirectory: String) -> SecretServiceKeyring {
        SecretServiceKeyring(attributes: ["application": "brokerd", "state-directory": canonical(stateDirectory)],
                             label: "brokerd cache key")
    }

    static func canonical(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    func readKey() throws -> [UInt8]? { try keyring.read() }
    func storeKey(_ key: [UInt8]) throws { try keyring.store(key) }
    func deleteKey() throws { try keyring.delete() }
}
