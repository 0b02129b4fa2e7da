import BrokerPlatform
import Crypto

/// Seals and opens the secrets of one database's rows: AES-256-GCM under the database's key, each blob bound to its
/// row by the associated data.
struct RowSealer: Sendable {
    private let key: SymmetricKey

    init(key: SymmetricKey) {
        self.key = key
    }

    /// The sealed secret of each change, at its offset: nil for a put without a secret and for other changes.
    func seal(_ changes: [RowChange]) throws -> [[UInt8]?] {
        let sealing = changes.reduce(0) { count, change in
            if case .put(let row) = change, row.secret != nil { count + 1 } else { count }
        }
        // The batch's random nonces in one system call: swift-crypto makes two per nonce (240,000 in an import of
        // 100,000 tokens).
        let nonces = SystemRandom.bytes(sealing * Self.nonceSize)
        var secrets: [[UInt8]?] = []
        secrets.reserveCapacity(changes.count)
        var used = 0
        for change in changes {
            guard case .put(let row) = change, let secret = row.secret else {
                secrets.append(nil)
                continue
            }
            let nonce = try AES.GCM.Nonce(data: nonces[used ..< used + Self.nonceSize])
            used += Self.nonceSize
            secrets.append(try seal(secret, section: row.section, key: row.key, nonce: nonce))
        }
        return secrets
    }

    /// AES-GCM's standard nonce: 96 bits, random for each secret sealed.
    static let nonceSize = 12

    /// The associated data binds a sealed secret to its row, so a sealed blob copied into another row (or
    /// another section) does not open there.
    static func associatedData(section: String, key: String) -> [UInt8] {
        var data: [UInt8] = []
        data.reserveCapacity(section.utf8.count + 1 + key.utf8.count)
        data += section.utf8
        data.append(0)
        data += key.utf8
        return data
    }

    func seal(_ secret: [UInt8], section: String, key: String, nonce: AES.GCM.Nonce = AES.GCM.Nonce()) throws -> [UInt8] {
        let box = try AES.GCM.seal(secret, using: self.key, nonce: nonce,
                                   authenticating: Self.associatedData(section: section, key: key))
        // Always present with the default 12-byte nonce.
        guard let combined = box.combined else { throw CryptoKitError.incorrectParameterSize }
        return combined.withUnsafeBytes { Array($0) }
    }

    func open(_ sealed: UnsafeRawBufferPointer, section: String, key: String) throws -> [UInt8] {
        let box = try AES.GCM.SealedBox(combined: sealed)
        let plaintext = try AES.GCM.open(box, using: self.key,
                                         authenticating: Self.associatedData(section: section, key: key))
        // One memcpy: Array(plaintext) would walk Data's iterator byte by byte (it showed in profiles).
        return plaintext.withUnsafeBytes { Array($0) }
    }
}
