#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The member names a reader looks for, compared with a key where it lies in the text: no String is made for a key
/// of the table and nothing is hashed (`JSONReader.readObject(_:_:)`, `readMembers`). A table holds a few dozen names
/// at most, grouped by length; a name of up to 16 bytes is held as two words and compared in registers (each key of
/// a silent request was a memcmp call per candidate and a retain of its group's array: a tenth of reading one).
public struct JSONKeyTable: Sendable {
    public let names: [String]
    /// The names by length, shortest first: `entries[firstOfLength[n] ..< firstOfLength[n + 1]]` are those of n bytes.
    private let entries: [Entry]
    private let firstOfLength: [Int]

    private struct Entry: Sendable {
        var index: Int
        /// The name's first 16 bytes, little-endian, zero past its end.
        var low: UInt64
        var high: UInt64
        /// The bytes past the first 16, for the rare longer name.
        var rest: [UInt8]
    }

    public init(_ names: [String]) {
        self.names = names
        let longest = names.map(\.utf8.count).max() ?? 0
        let sorted = names.indices.sorted { (names[$0].utf8.count, $0) < (names[$1].utf8.count, $1) }
        var entries: [Entry] = [], firstOfLength = [Int](repeating: 0, count: longest + 2)
        for index in sorted {
            let bytes = Array(names[index].utf8)
            let (low, high) = bytes.withUnsafeBytes { Self.words($0) }
            entries.append(Entry(index: index, low: low, high: high, rest: Array(bytes.dropFirst(16))))
        }
        // firstOfLength[n]: how many names are shorter than n bytes.
        for name in names where name.utf8.count + 1 < firstOfLength.count {
            for length in (name.utf8.count + 1)..<firstOfLength.count { firstOfLength[length] += 1 }
        }
        self.entries = entries
        self.firstOfLength = firstOfLength
    }

    /// The first 16 bytes of `bytes` as two little-endian words, zero past its end.
    private static func words(_ bytes: UnsafeRawBufferPointer) -> (UInt64, UInt64) {
        var words: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &words) { words in
            words.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[..<min(bytes.count, 16)]))
        }
        return (UInt64(littleEndian: words.0), UInt64(littleEndian: words.1))
    }

    /// The index of the name whose UTF-8 is `key`, nil for none.
    public func index(of key: UnsafeRawBufferPointer) -> Int? {
        guard key.count + 1 < firstOfLength.count else { return nil }
        let (low, high) = Self.words(key)
        return firstOfLength.withUnsafeBufferPointer { first in
            entries.withUnsafeBufferPointer { entries in
                for entry in entries[first[key.count]..<first[key.count + 1]] where entry.low == low && entry.high == high {
                    if key.count <= 16 { return entry.index }
                    let matches = entry.rest.withUnsafeBytes { rest in
                        memcmp(rest.baseAddress!, key.baseAddress! + 16, key.count - 16) == 0
                    }
                    if matches { return entry.index }
                }
                return nil
            }
        }
    }

    public func index(of name: String) -> Int? {
        var name = name
        return name.withUTF8 { index(of: UnsafeRawBufferPointer($0)) }
    }
}

extension JSONReader {
    /// A member's key as `readObject(_:_:)` hands it over: which name of the table it is, or any other key as read.
    public enum MemberKey: Sendable {
        case name(Int)
        case other(String)
    }
}
