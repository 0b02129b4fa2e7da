import BrokerJSON

/// A token an app asked for: which the background refresh keeps fresh.
public struct TokenUse: Sendable, Equatable {
    public var clientId: String
    public var homeAccountId: String
    public var authority: String
    public var scopes: [String]
    public var lastUsed: Int64

    /// The fields lowercased, the scopes sorted, joined by spaces. Every cache hit looks its use up by this key, so
    /// it is written into one buffer, each part copied and then ASCII lowered in place (the usual case; other text
    /// goes through `lowercased()`): joining lowered strings cost a hit more than its token lookup.
    package var key: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(clientId.utf8.count + homeAccountId.utf8.count + authority.utf8.count
                              + scopes.reduce(0) { $0 + $1.utf8.count + 1 } + 2)
        Self.appendLowered(clientId, to: &bytes)
        bytes.append(0x20)
        Self.appendLowered(homeAccountId, to: &bytes)
        bytes.append(0x20)
        Self.appendLowered(authority, to: &bytes)
        if scopes.count == 1 {
            bytes.append(0x20)
            Self.appendLowered(scopes[0], to: &bytes)
        } else if scopes.count > 1 {
            for scope in scopes.map(\.lowercasedIfNeeded).sorted() {
                bytes.append(0x20)
                bytes.append(contentsOf: scope.utf8)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A 64-bit digest of what `key` says, worked out without making the key: the fields as `key` lowers them, the
    /// scopes summed (so that their order does not count, as `key` sorts them). Uses with the same key have the same
    /// digest; a hit checks whether its use was noted by this (`TokenCache.isNoted`), where making the key and
    /// hashing it was the dearest part of a lookup.
    package var digest: UInt64 {
        var scopeSum: UInt64 = 0
        for scope in scopes { scopeSum &+= Self.loweredDigest(scope) }
        var digest = Self.loweredDigest(clientId)
        digest = Self.mix(digest, Self.loweredDigest(homeAccountId))
        digest = Self.mix(digest, Self.loweredDigest(authority))
        return Self.mix(digest, scopeSum)
    }

    /// Not symmetric (a client id and a home account id swapped, or the same, must not cancel out).
    private static func mix(_ digest: UInt64, _ part: UInt64) -> UInt64 {
        var mixed = (digest &* 0x9E37_79B9_7F4A_7C15) &+ part
        mixed ^= mixed >> 29
        return mixed &* 0xBF58_476D_1CE4_E5B9
    }

    /// A `ByteDigest`-like digest of the text as `lowercased()` writes it: ASCII is lowered 8 bytes at a time in a
    /// register; text with any other character is lowered by `lowercased()` first.
    static func loweredDigest(_ text: String) -> UInt64 {
        let (digest, ascii) = digestLoweringASCII(text)
        return ascii ? digest : digestLoweringASCII(text.lowercased()).digest
    }

    private static func digestLoweringASCII(_ text: String) -> (digest: UInt64, ascii: Bool) {
        let digest = text.utf8.withContiguousStorageIfAvailable { digestLoweringASCII(UnsafeRawBufferPointer($0)) }
        if let digest { return digest }
        var text = text  // a bridged or lazy string, made contiguous
        return text.withUTF8 { digestLoweringASCII(UnsafeRawBufferPointer($0)) }
    }

    private static func digestLoweringASCII(_ bytes: UnsafeRawBufferPointer) -> (digest: UInt64, ascii: Bool) {
        var h = ByteDigest.seed ^ (UInt64(bytes.count) &* 0x9E37_79B9_7F4A_7C15), high: UInt64 = 0, i = 0
        while i < bytes.count {
            let word = i + 8 <= bytes.count ? bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                : ByteDigest.tail(of: bytes, from: i)
            high |= word
            h = (h ^ ASCIIWord.lowered(word)) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 29
            i += 8
        }
        return (h ^ (h >> 32), high & 0x8080_8080_8080_8080 == 0)
    }

    private static func appendLowered(_ text: String, to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(contentsOf: text.utf8)
        let ascii = bytes.withUnsafeMutableBufferPointer { buffer -> Bool in
            var high: UInt8 = 0
            for index in start..<buffer.count {
                let byte = buffer[index]
                high |= byte
                if byte &- 0x41 < 26 { buffer[index] = byte | 0x20 }
            }
            return high < 0x80
        }
        if !ascii {
            bytes.removeSubrange(start...)
            bytes.append(contentsOf: text.lowercased().utf8)
        }
    }

    package init(clientId: String, homeAccountId: String, authority: String, scopes: [String], lastUsed: Int64) {
        self.clientId = clientId
        self.homeAccountId = homeAccountId
        self.authority = authority
        self.scopes = scopes
        self.lastUsed = lastUsed
    }

    package init?(json: JSONValue) {
        guard let object = json.objectValue, let clientId = object["clientId"]?.stringValue,
              let hid = object["homeAccountId"]?.stringValue, let authority = object["authority"]?.stringValue else { return nil }
        self.init(clientId: clientId, homeAccountId: hid, authority: authority,
                  scopes: (object["scopes"]?.arrayValue ?? []).compactMap(\.stringValue),
                  lastUsed: object["lastUsed"]?.integerValue ?? 0)
    }

    package var json: JSONValue {
        .object(JSONObject([
            "clientId": .string(clientId), "homeAccountId": .string(homeAccountId), "authority": .string(authority),
            "scopes": .array(scopes.map(JSONValue.string)), "lastUsed": .string(String(lastUsed)),
        ]))
    }
}
