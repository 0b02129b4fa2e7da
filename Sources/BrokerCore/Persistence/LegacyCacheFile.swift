import BrokerCache
import Crypto

/// The cache file of brokerd before the database (`cache.bin`): the whole unified-schema JSON sealed with
/// AES-256-GCM. Only read now, once, to migrate it (CacheStore).
///
/// Layout: the 8-byte header `BRKDC\x00\x00\x01` (authenticated as associated data), then nonce, ciphertext and tag
/// (`AES.GCM.SealedBox.combined`).
enum LegacyCacheFile {
    static let header: [UInt8] = Array("BRKDC".utf8) + [0, 0, 1]

    enum Failure: Error { case keyWasMissing, cannotDecrypt, notADocument(String) }

    static func read(_ file: [UInt8], key: SymmetricKey) throws(Failure) -> CacheDocument {
        guard file.count > header.count, Array(file[0..<header.count]) == header,
              let box = try? AES.GCM.SealedBox(combined: file[header.count...]),
              let plaintext = try? AES.GCM.open(box, using: key, authenticating: header) else { throw .cannotDecrypt }
        do { return try CacheDocument.parse(Array(plaintext)) } catch { throw .notADocument(error.description) }
    }

    /// A file in the old format (the tests use it to check the migration).
    static func seal(_ plaintext: [UInt8], key: SymmetricKey) throws -> [UInt8] {
        header + (try AES.GCM.seal(plaintext, using: key, authenticating: header).combined.map { Array($0) } ?? [])
    }
}
