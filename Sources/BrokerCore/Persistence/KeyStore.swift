import BrokerPlatform
import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// A place outside brokerd's own files that keeps the cache key (the freedesktop Secret Service). BrokerCore only
/// asks it for the key; the module that talks to it (SecretService, over D-Bus) answers.
public protocol KeyVault: Sendable {
    /// The store's name in the config and in status: "secret-service".
    var kind: String { get }
    /// Where the key is, for status and logs: "gnome-keyring on the session bus".
    var location: String { get }
    /// The key, or nil when the vault holds none. Errors describe themselves and never contain the key.
    func readKey() throws -> [UInt8]?
    /// Stores the key, replacing one stored before.
    func storeKey(_ key: [UInt8]) throws
    func deleteKey() throws
}

/// Where the cache's encryption key lives. It is always explicit (chosen in the config or automatically, with the
/// reason shown by `brokerctl status`); there is no silent plaintext fallback.
public enum KeyStore: Sendable, Equatable, CustomStringConvertible {
    /// A 32-byte key in a file only the user can read (0600), created on first use.
    case file(path: String)
    /// Nothing is written to disk: the cache lives and dies with the process.
    case memory
    /// The key is in a vault (the Secret Service); `keyFile` is where the file store keeps it, so that a key found
    /// there is moved into the vault.
    case vault(any KeyVault, keyFile: String)

    public var name: String {
        switch self {
        case .file: return "file"
        case .memory: return "memory"
        case .vault(let vault, _): return vault.kind
        }
    }

    /// Where the key is: the key file, the vault, or nowhere.
    public var location: String {
        switch self {
        case .file(let path): return path
        case .memory: return "nothing on disk"
        case .vault(let vault, _): return vault.location
        }
    }

    public var description: String { "\(name) (\(location))" }

    public static func == (a: KeyStore, b: KeyStore) -> Bool {
        switch (a, b) {
        case (.file(let x), .file(let y)): return x == y
        case (.memory, .memory): return true
        case (.vault(let x, let xf), .vault(let y, let yf)): return x.kind == y.kind && x.location == y.location && xf == yf
        default: return false
        }
    }

    public enum Failure: Error, CustomStringConvertible, Sendable {
        case insecurePermissions(path: String, mode: mode_t)
        case wrongSize(path: String, bytes: Int)
        case io(FileError)
        /// The vault failed (its own words, which never hold the key).
        case vault(location: String, String)
        /// The vault holds something that is not a 256-bit key.
        case vaultKeySize(location: String, bytes: Int)
        /// A key written to its new place did not read back the same; the old place still holds it.
        case readBack(String)

        public var description: String {
            switch self {
            case .insecurePermissions(let path, let mode):
                return "key file \(path) is readable by others (mode \(String(mode & 0o777, radix: 8))); run: chmod 600 \(path)"
            case .wrongSize(let path, let bytes):
                return "key file \(path) holds \(bytes) bytes, not a 256-bit key; move it away to start with an empty cache"
            case .io(let error):
                return error.description
            case .vault(let location, let why):
                return "the key store \(location): \(why)"
            case .vaultKeySize(let location, let bytes):
                return "the key in \(location) holds \(bytes) bytes, not a 256-bit key; delete that item to start with an empty cache"
            case .readBack(let what):
                return "moving the cache key: \(what) did not read back the key that was written; the key stays where it was"
            }
        }
    }

    /// The key, and whether it was just created (so that an existing cache file cannot be decrypted with it).
    public func loadKey() throws(Failure) -> (key: SymmetricKey, created: Bool)? {
        var notes: [String] = []
        return try loadKey(leaving: nil, database: nil, notes: &notes)
    }

    /// The key. `leaving`: a vault the key moves out of (into the key file); `database`: the cache, which decides
    /// between two different keys; `notes`: what was moved, for the log (never the key).
    public func loadKey(leaving former: (any KeyVault)?, database: String?,
                        notes: inout [String]) throws(Failure) -> (key: SymmetricKey, created: Bool)? {
        switch self {
        case .memory:
            return nil
        case .file(let path):
            return try Self.loadFileKey(path, leaving: former, database: database, notes: &notes)
        case .vault(let vault, let keyFile):
            return try Self.loadVaultKey(vault, keyFile: keyFile, database: database, notes: &notes)
        }
    }
}
