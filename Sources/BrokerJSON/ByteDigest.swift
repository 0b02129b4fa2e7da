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
            var tail: UInt64 = 0
            withUnsafeMutableBytes(of: &tail) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[i...])) }
            h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
            h ^= h >> 29
        }
        return h ^ (h >> 32)
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

    package init(_ text: String) { self.text = text }

    package func hash(into hasher: inout Hasher) { hasher.combine(ByteDigest.of(text)) }
}
