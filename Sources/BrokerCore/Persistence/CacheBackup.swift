import Crypto
import CryptoExtras

/// A backup of the whole cache (`brokerctl backup`), sealed under a passphrase, never in the clear: the key is derived
/// with scrypt (memory-hard, so a stolen file is costly to guess at), then the MSAL document is sealed with
/// AES-256-GCM. The header (format, cost, salt) is authenticated with it, so a file whose cost was edited does not open.
///
///     "brokerd-backup\0" | version (1) | log2 N, r, p (1 byte each) | salt (16) | nonce (12) | ciphertext | tag (16)
///
/// Restoring merges the document with import's rules (`brokerctl restore`), as pizauth's restore brings back a dump.
public enum CacheBackup {
    static let magic: [UInt8] = Array("brokerd-backup".utf8) + [0]
    static let version: UInt8 = 1
    static let saltBytes = 16
    static var headerBytes: Int { magic.count + 1 + 3 + saltBytes }

    /// scrypt's cost. The standard one takes 128 MiB and about half a second here; a file asking for more than the
    /// bounds below is refused before anything is allocated.
    public struct Cost: Sendable, Equatable {
        public var log2Rounds: UInt8
        public var blockSize: UInt8
        public var parallelism: UInt8
        public static let standard = Cost(log2Rounds: 17, blockSize: 8, parallelism: 1)
        static let bounds = Cost(log2Rounds: 20, blockSize: 16, parallelism: 4)
    }

    public static let minimumPassphraseLength = 8

    public enum Failure: Error, Sendable, CustomStringConvertible {
        case notABackup
        case unsupportedVersion(UInt8)
        case tooCostly(Cost)
        case wrongPassphrase
        case passphraseTooShort

        public var description: String {
            switch self {
            case .notABackup: return "the file is not a brokerd backup"
            case .unsupportedVersion(let version): return "the backup is of format \(version), which this brokerd cannot read"
            case .tooCostly(let cost):
                return "the backup asks for a key derivation too costly to run (scrypt N=2^\(cost.log2Rounds), r=\(cost.blockSize), "
                    + "p=\(cost.parallelism))"
            case .wrongPassphrase: return "the passphrase does not open the backup (or the file was changed)"
            case .passphraseTooShort: return "a backup passphrase has at least \(minimumPassphraseLength) characters"
            }
        }
    }

    public static func seal(_ document: [UInt8], passphrase: String, cost: Cost = .standard) throws -> [UInt8] {
        guard passphrase.count >= minimumPassphraseLength else { throw Failure.passphraseTooShort }
        var header = magic + [version, cost.log2Rounds, cost.blockSize, cost.parallelism]
        header += (0..<saltBytes).map { _ in UInt8.random(in: .min ... .max) }
        let key = try deriveKey(passphrase, salt: header.suffix(saltBytes), cost: cost)
        let sealed = try AES.GCM.seal(document, using: key, authenticating: header)
        guard let combined = sealed.combined else { throw Failure.notABackup }
        return header + Array(combined)
    }

    public static func open(_ file: [UInt8], passphrase: String) throws -> [UInt8] {
        guard file.count > headerBytes + 12 + 16, Array(file.prefix(magic.count)) == magic else { throw Failure.notABackup }
        let fields = Array(file[magic.count ..< magic.count + 4])
        guard fields[0] == version else { throw Failure.unsupportedVersion(fields[0]) }
        let cost = Cost(log2Rounds: fields[1], blockSize: fields[2], parallelism: fields[3])
        guard cost.log2Rounds >= 1, cost.log2Rounds <= Cost.bounds.log2Rounds, cost.blockSize >= 1,
              cost.blockSize <= Cost.bounds.blockSize, cost.parallelism >= 1, cost.parallelism <= Cost.bounds.parallelism else {
            throw Failure.tooCostly(cost)
        }
        let header = Array(file.prefix(headerBytes))
        let key = try deriveKey(passphrase, salt: header.suffix(saltBytes), cost: cost)
        do {
            let box = try AES.GCM.SealedBox(combined: file.dropFirst(headerBytes))
            return Array(try AES.GCM.open(box, using: key, authenticating: header))
        } catch {
            throw Failure.wrongPassphrase
        }
    }

    private static func deriveKey(_ passphrase: String, salt: ArraySlice<UInt8>, cost: Cost) throws -> SymmetricKey {
        try KDF.Scrypt.deriveKey(from: Array(passphrase.utf8), salt: Array(salt), outputByteCount: 32,
                                 rounds: 1 << Int(cost.log2Rounds), blockSize: Int(cost.blockSize),
                                 parallelism: Int(cost.parallelism))
    }
}
