import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// Where the cache's encryption key lives. It is always explicit (chosen in the config and shown by
/// `brokerctl status`); there is no silent plaintext fallback.
public enum KeyStore: Sendable, Equatable, CustomStringConvertible {
    /// A 32-byte key in a file only the user can read (0600), created on first use.
    case file(path: String)
    /// Nothing is written to disk: the cache lives and dies with the process.
    case memory

    public var name: String {
        switch self {
        case .file: return "file"
        case .memory: return "memory"
        }
    }

    public var description: String {
        switch self {
        case .file(let path): return "file (\(path))"
        case .memory: return "memory (nothing persisted)"
        }
    }

    public enum Failure: Error, CustomStringConvertible, Sendable {
        case insecurePermissions(path: String, mode: mode_t)
        case wrongSize(path: String, bytes: Int)
        case io(FileError)

        public var description: String {
            switch self {
            case .insecurePermissions(let path, let mode):
                return "key file \(path) is readable by others (mode \(String(mode & 0o777, radix: 8))); run: chmod 600 \(path)"
            case .wrongSize(let path, let bytes):
                return "key file \(path) holds \(bytes) bytes, not a 256-bit key; move it away to start with an empty cache"
            case .io(let error):
                return error.description
            }
        }
    }

    /// The key, and whether it was just created (so that an existing cache file cannot be decrypted with it).
    public func loadKey() throws(Failure) -> (key: SymmetricKey, created: Bool)? {
        guard case .file(let path) = self else { return nil }
        var info = stat()
        if stat(path, &info) == 0 {
            if info.st_mode & 0o077 != 0 { throw .insecurePermissions(path: path, mode: info.st_mode) }
            let bytes: [UInt8]
            do { bytes = try AtomicFile.read(path) ?? [] } catch { throw .io(error) }
            guard bytes.count == 32 else { throw .wrongSize(path: path, bytes: bytes.count) }
            return (SymmetricKey(data: bytes), false)
        }
        let key = SymmetricKey(size: .bits256)
        let bytes = key.withUnsafeBytes { Array($0) }
        do {
            try AtomicFile.makeDirectory(AtomicFile.parentDirectory(of: path))
            try AtomicFile.replace(path, with: bytes, mode: 0o600)
        } catch { throw .io(error) }
        return (key, true)
    }
}
