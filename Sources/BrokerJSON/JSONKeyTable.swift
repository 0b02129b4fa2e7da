#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The member names a reader looks for, compared with a key where it lies in the text: no String is made for a key
/// of the table and nothing is hashed (`JSONReader.readObject(_:_:)`, `readMembers`). Names are looked up by their
/// length first; a table holds a few dozen names at most.
public struct JSONKeyTable: Sendable {
    public let names: [String]
    /// Every name's UTF-8, back to back.
    private let text: [UInt8]
    /// Where each name is in `text`.
    private let starts: [Int]
    /// For each length up to `longest`, the indexes of the names of that length.
    private let byLength: [[Int]]

    public init(_ names: [String]) {
        self.names = names
        var text: [UInt8] = [], starts: [Int] = []
        let longest = names.map(\.utf8.count).max() ?? 0
        var byLength = [[Int]](repeating: [], count: longest + 1)
        for (index, name) in names.enumerated() {
            starts.append(text.count)
            text.append(contentsOf: name.utf8)
            byLength[name.utf8.count].append(index)
        }
        self.text = text
        self.starts = starts
        self.byLength = byLength
    }

    /// The index of the name whose UTF-8 is `key`, nil for none.
    public func index(of key: UnsafeRawBufferPointer) -> Int? {
        guard key.count < byLength.count else { return nil }
        return text.withUnsafeBytes { text in
            for index in byLength[key.count] where key.count == 0 || memcmp(text.baseAddress! + starts[index], key.baseAddress!, key.count) == 0 {
                return index
            }
            return nil
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
