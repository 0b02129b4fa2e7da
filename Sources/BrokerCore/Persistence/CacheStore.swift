import BrokerCache
import Crypto

/// The cache on disk: the unified-schema JSON sealed with AES-256-GCM and replaced atomically.
///
/// File layout: the 8-byte header `BRKDC\x00\x00\x01` (authenticated as associated data), then nonce,
/// ciphertext and tag (`AES.GCM.SealedBox.combined`).
public actor CacheStore {
    public static let header: [UInt8] = Array("BRKDC".utf8) + [0, 0, 1]

    public let path: String
    public let keyStore: KeyStore
    private var key: SymmetricKey?

    /// What loading found: the document, and a problem worth reporting if the file could not be used.
    public struct Loaded: Sendable {
        public var document: CacheDocument
        /// Set when the file was unusable and moved aside (the new name is in the message).
        public var problem: String?
    }

    public init(path: String, keyStore: KeyStore) {
        self.path = path
        self.keyStore = keyStore
    }

    public var persists: Bool { keyStore != .memory }

    /// Reads the cache. A file that cannot be decrypted or parsed is moved aside and reported — never
    /// overwritten — and brokerd starts with an empty cache.
    public func load() throws -> Loaded {
        guard let (key, created) = try keyStore.loadKey() else { return Loaded(document: CacheDocument()) }
        self.key = key
        guard let sealed = try AtomicFile.read(path) else { return Loaded(document: CacheDocument()) }
        let reason: String
        if created {
            reason = "the key file was missing (a new key was made)"
        } else {
            do {
                let plaintext = try open(sealed, with: key)
                do {
                    return Loaded(document: try CacheDocument.parse(plaintext))
                } catch {
                    reason = "its content is not a cache document (\(error))"
                }
            } catch {
                reason = "it cannot be decrypted with the key"
            }
        }
        let aside = try AtomicFile.moveAside(path, reason: "unreadable")
        return Loaded(document: CacheDocument(),
                      problem: "cache file \(path) could not be used because \(reason); it was moved to \(aside)")
    }

    public func save(_ plaintext: [UInt8]) throws {
        guard persists else { return }
        guard let key else { throw FileError(operation: "encrypt (key not loaded)", path: path, code: 0) }
        let sealed = try AES.GCM.seal(plaintext, using: key, authenticating: Self.header)
        guard let combined = sealed.combined else { throw FileError(operation: "encrypt", path: path, code: 0) }
        try AtomicFile.makeDirectory(AtomicFile.parentDirectory(of: path))
        try AtomicFile.replace(path, with: Self.header + Array(combined))
    }

    private func open(_ file: [UInt8], with key: SymmetricKey) throws -> [UInt8] {
        guard file.count > Self.header.count, Array(file[0..<Self.header.count]) == Self.header else {
            throw FileError(operation: "decrypt (unknown header)", path: path, code: 0)
        }
        let box = try AES.GCM.SealedBox(combined: file[Self.header.count...])
        return Array(try AES.GCM.open(box, using: key, authenticating: Self.header))
    }
}
