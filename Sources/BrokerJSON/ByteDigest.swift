/// A fast 64-bit digest of bytes, for the hash tables a cache hit looks strings up in: SipHash, which `Hasher`
/// runs over every byte of a String, cost more than the rest of such a lookup (a home account id is 70 bytes, a
/// request line a few hundred). A table keyed by it hashes only the digest (`Hasher.combine(UInt64)`).
///
/// A multiply-and-shift over 8 bytes at a time, seeded per process. It is no defence against someone who can choose
/// many colliding keys and watch the timing; the tables that use it hold what the user's own processes and the
/// user's identity providers put there (strings of the cache, a connection's own requests), and a collision only
/// costs a comparison.
package enum ByteDigest {
    package static let seed = UInt64.random(in: .min ... .max)

    @inlinable
    package static func of(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h = seed ^ (UInt64(bytes.count) &* 0x9E37_79B9_7F4A_7C15)
        var i = 0
        while i + 8 <= bytes.count {
            h = (h ^ bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 29
            i += 8
        }
        if i < bytes.count {
            // The last one to seven bytes as one word (the length, in the seed, tells "a" from "a\0").
            let tail = tail(of: bytes, from: i)
            h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
            h ^= h >> 29
        }
        return h ^ (h >> 32)
    }

    /// The bytes from `start` to the end (fewer than eight) as the low bytes of a word, the rest zero. Loaded as
    /// the last eight bytes and shifted when there are eight: a copy of the tail was a call to `memcpy` per string.
    @inlinable @inline(__always)
    package static func tail(of bytes: UnsafeRawBufferPointer, from start: Int) -> UInt64 {
        let count = bytes.count - start
        if bytes.count >= 8 {
            let last = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self))
            return last >> (8 * UInt64(8 - count))
        }
        var word: UInt64 = 0
        for index in 0..<count { word |= UInt64(bytes[start + index]) << (8 * UInt64(index)) }
        return word
    }

    /// A hash table's hash of a digest, for `Hashable._rawHashValue(seed:)`: what the table asks for, without
    /// `Hasher` (setting up SipHash and finishing it was most of a lookup by a digest; a hit makes about ten).
    /// The seed is mixed in, so that two tables of the same keys do not order them alike.
    @inlinable @inline(__always)
    package static func tableHash(_ digest: UInt64, seed: Int) -> Int {
        var h = (digest ^ UInt64(UInt(bitPattern: seed))) &* 0x9E37_79B9_7F4A_7C15
        h ^= h >> 32
        return Int(truncatingIfNeeded: h)
    }

    @inlinable
    package static func of(_ text: String) -> UInt64 {
        if let digest = text.utf8.withContiguousStorageIfAvailable({ of(UnsafeRawBufferPointer($0)) }) { return digest }
        var text = text  // a bridged or lazy string, made contiguous
        return text.withUTF8 { of(UnsafeRawBufferPointer($0)) }
    }
}

/// A String hashed by its `ByteDigest` (compared as a String): for the sets and tables a load fills with many long
/// strings (entry keys of 150 bytes, home account ids) and a hit looks strings up in. The digest is not kept, so
/// it takes no more room than the String.
package struct DigestHashed: Hashable, Sendable {
    package let text: String

    @inlinable
    package init(_ text: String) { self.text = text }

    // Inlinable, as the three below: a table of another module that looked one up called them through the protocol's
    // witness. `_rawHashValue` is what tables call: without `Hasher`, as `ByteDigest.tableHash` says.
    @inlinable
    package func hash(into hasher: inout Hasher) { hasher.combine(ByteDigest.of(text)) }

    @inlinable
    package func _rawHashValue(seed: Int) -> Int { ByteDigest.tableHash(ByteDigest.of(text), seed: seed) }

    @inlinable
    package static func == (a: DigestHashed, b: DigestHashed) -> Bool { a.text == b.text }
}
