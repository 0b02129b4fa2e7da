import BrokerPlatform
import BrokerStore
import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// Loading the key, and moving it when the key store changed (file ⇄ vault), so that the cache stays readable.
///
/// A move copies first, reads the copy back, and only then removes the old place: a crash (kill -9) at any step
/// leaves the key in the old place, the new one, or both. When both hold it, the next start finishes the move;
/// when both hold different keys, the one that opens the cache database wins and the other is kept aside.
extension KeyStore {
    typealias Key = (key: SymmetricKey, created: Bool)

    static func loadVaultKey(_ vault: any KeyVault, keyFile: String, database: String?,
                             notes: inout [String]) throws(Failure) -> Key {
        let inVault = try readVault(vault)
        let inFile = try readKeyFile(keyFile)
        switch (inVault, inFile) {
        case (nil, nil):
            let key = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
            try copy(key, into: vault)
            return (SymmetricKey(data: key), true)
        case (let stored?, nil):
            return (SymmetricKey(data: stored), false)
        case (nil, let file?):
            try copy(file, into: vault)
            try removeKeyFile(keyFile)
            notes.append("the cache key moved from \(keyFile) to \(vault.location); the key file was removed")
            return (SymmetricKey(data: file), false)
        case (let stored?, let file?):
            if stored == file {
                try removeKeyFile(keyFile)
                notes.append("the cache key is in \(vault.location); the copy left in \(keyFile) by an interrupted move was removed")
                return (SymmetricKey(data: stored), false)
            }
            if opens(database, file) == true && opens(database, stored) != true {
                try copy(file, into: vault)
                try removeKeyFile(keyFile)
                notes.append("\(vault.location) and \(keyFile) held different keys; only the file's opens the cache, so it "
                    + "replaced the one in \(vault.location) and the key file was removed")
                return (SymmetricKey(data: file), false)
            }
            let aside = try moveKeyFileAside(keyFile)
            notes.append("\(vault.location) and \(keyFile) held different keys; the one in \(vault.location) is used and the "
                + "key file was moved to \(aside)")
            return (SymmetricKey(data: stored), false)
        }
    }

    static func loadFileKey(_ path: String, leaving former: (any KeyVault)?, database: String?,
                            notes: inout [String]) throws(Failure) -> Key {
        let inFile = try readKeyFile(path)
        var inVault: [UInt8]?
        if let former {
            do { inVault = try readVault(former) } catch {
                // Without a key file the vault's key is the cache's only one: no new key may replace it.
                guard inFile != nil else { throw error }
                notes.append("\(path) is used; the key in \(former.location) could not be read to finish moving it: \(error)")
            }
        }
        switch (inFile, inVault) {
        case (nil, nil):
            let key = SymmetricKey(size: .bits256)
            try writeKeyFile(path, key.withUnsafeBytes { Array($0) })
            return (key, true)
        case (let file?, nil):
            return (SymmetricKey(data: file), false)
        case (nil, let stored?):
            guard let former else { fatalError("a key read from no vault") }
            try writeKeyFile(path, stored)
            try delete(from: former)
            notes.append("the cache key moved from \(former.location) to \(path); it was deleted from \(former.location)")
            return (SymmetricKey(data: stored), false)
        case (let file?, let stored?):
            guard let former else { fatalError("a key read from no vault") }
            if file == stored {
                try delete(from: former)
                notes.append("the cache key is in \(path); the copy left in \(former.location) by an interrupted move was deleted")
                return (SymmetricKey(data: file), false)
            }
            if opens(database, stored) == true && opens(database, file) != true {
                let aside = try moveKeyFileAside(path)
                try writeKeyFile(path, stored)
                try delete(from: former)
                notes.append("\(path) and \(former.location) held different keys; only the latter opens the cache, so it "
                    + "moved to \(path) (the old key file is \(aside))")
                return (SymmetricKey(data: stored), false)
            }
            notes.append("\(former.location) holds another brokerd key for this state directory, which does not open the "
                + "cache; \(path) is used and the other key was left where it is")
            return (SymmetricKey(data: file), false)
        }
    }

    /// The key the store holds now, read afresh and never created or moved (nil: it holds none). A key store can
    /// change under a running brokerd: another Secret Service took the name, or the key file came back.
    public func storedKey() throws(Failure) -> SymmetricKey? {
        switch self {
        case .memory: return nil
        case .file(let path): return try Self.readKeyFile(path).map { SymmetricKey(data: $0) }
        case .vault(let vault, _): return try Self.readVault(vault).map { SymmetricKey(data: $0) }
        }
    }

    /// Keys brokerd set aside itself (`<key file>.superseded-<time>`, when the key store and the key file held
    /// different keys): each may be the key of a cache waiting for it, as after a switch of key store.
    public func supersededKeys() -> [SymmetricKey] {
        let keyFile: String
        switch self {
        case .memory: return []
        case .file(let path): keyFile = path
        case .vault(_, let path): keyFile = path
        }
        let directory = AtomicFile.parentDirectory(of: keyFile)
        let prefix = String(keyFile.dropFirst(directory.count + 1)) + ".superseded-"
        return AtomicFile.names(in: directory).filter { $0.hasPrefix(prefix) }.sorted().compactMap { name in
            (try? Self.readKeyFile(directory + "/" + name)).flatMap { $0 }.map { SymmetricKey(data: $0) }
        }
    }

    /// Puts the current cache's key into a store that holds no key (it came up empty while brokerd ran), so that the
    /// next start opens the cache. A store that holds a key is never overwritten here.
    public func storeIfEmpty(_ key: SymmetricKey) throws(Failure) -> Bool {
        guard try storedKey() == nil else { return false }
        let bytes = key.withUnsafeBytes { Array($0) }
        switch self {
        case .memory: return false
        case .file(let path): try Self.writeKeyFile(path, bytes)
        case .vault(let vault, _): try Self.copy(bytes, into: vault)
        }
        return true
    }

    // MARK: Steps

    private static func readVault(_ vault: any KeyVault) throws(Failure) -> [UInt8]? {
        let bytes: [UInt8]?
        do { bytes = try vault.readKey() } catch { throw .vault(location: vault.location, "\(error)") }
        if let bytes, bytes.count != 32 { throw .vaultKeySize(location: vault.location, bytes: bytes.count) }
        return bytes
    }

    /// Stores the key and reads it back; only a key that reads back the same counts as moved.
    private static func copy(_ key: [UInt8], into vault: any KeyVault) throws(Failure) {
        do { try vault.storeKey(key) } catch { throw .vault(location: vault.location, "\(error)") }
        guard try readVault(vault) == key else { throw .readBack(vault.location) }
    }

    private static func delete(from vault: any KeyVault) throws(Failure) {
        do { try vault.deleteKey() } catch { throw .vault(location: vault.location, "\(error)") }
    }

    static func readKeyFile(_ path: String) throws(Failure) -> [UInt8]? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        if info.st_mode & 0o077 != 0 { throw .insecurePermissions(path: path, mode: info.st_mode) }
        let bytes: [UInt8]
        do { bytes = try AtomicFile.read(path) ?? [] } catch { throw .io(error) }
        guard bytes.count == 32 else { throw .wrongSize(path: path, bytes: bytes.count) }
        return bytes
    }

    /// Writes the key file (0600, durable) and reads it back.
    private static func writeKeyFile(_ path: String, _ key: [UInt8]) throws(Failure) {
        do {
            try AtomicFile.makeDirectory(AtomicFile.parentDirectory(of: path))
            try AtomicFile.replace(path, with: key, mode: 0o600)
        } catch { throw .io(error) }
        guard try readKeyFile(path) == key else { throw .readBack(path) }
    }

    private static func removeKeyFile(_ path: String) throws(Failure) {
        if unlink(path) != 0 && errno != ENOENT { throw .io(FileError(operation: "unlink", path: path, code: errno)) }
        do { try AtomicFile.syncDirectory(AtomicFile.parentDirectory(of: path)) } catch { throw .io(error) }
    }

    private static func moveKeyFileAside(_ path: String) throws(Failure) -> String {
        do { return try AtomicFile.moveAside(path, reason: "superseded") } catch { throw .io(error) }
    }

    /// Whether `key` opens the cache database (nil: there is none, or it cannot be told).
    private static func opens(_ database: String?, _ key: [UInt8]) -> Bool? {
        guard let database, AtomicFile.exists(database) else { return nil }
        do {
            let opened = try CacheDatabase(path: database, key: SymmetricKey(data: key))
            opened.close()
            return true
        } catch CacheDatabase.Failure.wrongKey {
            return false
        } catch {
            return nil
        }
    }
}
