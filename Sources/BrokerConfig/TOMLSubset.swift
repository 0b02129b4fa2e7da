/// The part of TOML brokerd's config file uses: comments, `[table]` and `[table.sub]` headers, and
/// `key = value` with strings ("basic" or 'literal'), integers, booleans and single-line arrays of those.
/// Everything else is an error that names the line.
public enum TOMLValue: Equatable, Sendable {
    case string(String)
    case integer(Int)
    case bool(Bool)
    case array([TOMLValue])
}

public struct TOMLError: Error, CustomStringConvertible, Sendable, Equatable {
    public var line: Int
    public var message: String
    public var description: String { "line \(line): \(message)" }

    public init(line: Int, message: String) {
        self.line = line
        self.message = message
    }
}

public struct TOMLTable: Sendable, Equatable {
    /// The line of the `[name]` header (0 for the top level), so errors about the table itself can name it.
    public var headerLine = 0
    /// Keys in file order, with the line each was set on (for error messages).
    public var entries: [(key: String, value: TOMLValue, line: Int)] = []

    public static func == (lhs: TOMLTable, rhs: TOMLTable) -> Bool {
        lhs.entries.map(\.key) == rhs.entries.map(\.key) && lhs.entries.map(\.value) == rhs.entries.map(\.value)
    }
}

public enum TOMLSubset {
    /// Tables by dotted name ("" is the top level), in file order.
    public static func parse(_ text: String) throws(TOMLError) -> [(name: String, table: TOMLTable)] {
        var tables: [(name: String, table: TOMLTable)] = [("", TOMLTable())]
        // Split bytes, not Characters: "\r\n" is one Character in Swift and would never match "\n".
        for (offset, rawLine) in text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let number = offset + 1
            var scanner = Scanner(Array(rawLine), line: number)
            scanner.skipSpaces()
            if scanner.atEndOrComment { continue }
            if scanner.peek == UInt8(ascii: "[") {
                scanner.advance()
                let name = try scanner.readDottedKey()
                try scanner.expect(UInt8(ascii: "]"))
                try scanner.expectEndOfLine()
                if tables.contains(where: { $0.name == name }) {
                    throw TOMLError(line: number, message: "table [\(name)] appears twice")
                }
                tables.append((name, TOMLTable(headerLine: number)))
                continue
            }
            let key = try scanner.readDottedKey()
            try scanner.expect(UInt8(ascii: "="))
            let value = try scanner.readValue()
            try scanner.expectEndOfLine()
            if tables[tables.count - 1].table.entries.contains(where: { $0.key == key }) {
                throw TOMLError(line: number, message: "'\(key)' is set twice")
            }
            tables[tables.count - 1].table.entries.append((key, value, number))
        }
        return tables
    }

    private struct Scanner {
        let bytes: [UInt8]
        let line: Int
        var position = 0

        init(_ bytes: [UInt8], line: Int) {
            self.bytes = bytes.last == 0x0D ? Array(bytes.dropLast()) : bytes
            self.line = line
        }

        var peek: UInt8? { position < bytes.count ? bytes[position] : nil }
        var atEndOrComment: Bool { peek == nil || peek == UInt8(ascii: "#") }
        mutating func advance() { position += 1 }

        mutating func skipSpaces() {
            while let byte = peek, byte == 0x20 || byte == 0x09 { advance() }
        }

        func fail(_ message: String) -> TOMLError { TOMLError(line: line, message: message) }

        mutating func expect(_ byte: UInt8) throws(TOMLError) {
            skipSpaces()
            guard peek == byte else { throw fail("expected '\(Character(Unicode.Scalar(byte)))'") }
            advance()
        }

        mutating func expectEndOfLine() throws(TOMLError) {
            skipSpaces()
            guard atEndOrComment else { throw fail("unexpected text after the value") }
        }

        mutating func readDottedKey() throws(TOMLError) -> String {
            var parts: [String] = []
            repeat {
                skipSpaces()
                if peek == UInt8(ascii: "\"") {
                    parts.append(try readBasicString())
                } else {
                    let start = position
                    while let byte = peek, byte.isBareKeyCharacter { advance() }
                    guard position > start else { throw fail("expected a key") }
                    parts.append(String(decoding: bytes[start..<position], as: UTF8.self))
                }
                skipSpaces()
            } while peek == UInt8(ascii: ".") && { advance(); return true }()
            return parts.joined(separator: ".")
        }

        mutating func readValue() throws(TOMLError) -> TOMLValue {
            skipSpaces()
            guard let byte = peek else { throw fail("expected a value") }
            switch byte {
            case UInt8(ascii: "\""): return .string(try readBasicString())
            case UInt8(ascii: "'"):
                advance()
                let start = position
                while let b = peek, b != UInt8(ascii: "'") { advance() }
                guard peek != nil else { throw fail("unterminated string") }
                defer { advance() }
                return .string(String(decoding: bytes[start..<position], as: UTF8.self))
            case UInt8(ascii: "["):
                advance()
                var items: [TOMLValue] = []
                while true {
                    skipSpaces()
                    if peek == UInt8(ascii: "]") { advance(); break }
                    items.append(try readValue())
                    skipSpaces()
                    if peek == UInt8(ascii: ",") { advance(); continue }
                    guard peek == UInt8(ascii: "]") else { throw fail("expected ',' or ']' in array") }
                }
                return .array(items)
            default:
                let start = position
                while let b = peek, b != 0x20, b != 0x09, b != UInt8(ascii: ","), b != UInt8(ascii: "]"),
                      b != UInt8(ascii: "#") { advance() }
                let word = String(decoding: bytes[start..<position], as: UTF8.self)
                if word == "true" { return .bool(true) }
                if word == "false" { return .bool(false) }
                if let number = Int(word.replacingUnderscores) { return .integer(number) }
                throw fail("'\(word)' is not a value (strings need quotes)")
            }
        }

        mutating func readBasicString() throws(TOMLError) -> String {
            advance()
            var out: [UInt8] = []
            while true {
                guard let byte = peek else { throw fail("unterminated string") }
                advance()
                if byte == UInt8(ascii: "\"") { break }
                if byte == UInt8(ascii: "\\") {
                    guard let escaped = peek else { throw fail("unterminated escape") }
                    advance()
                    switch escaped {
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "\""): out.append(0x22)
                    case UInt8(ascii: "\\"): out.append(0x5C)
                    default: throw fail("unsupported escape '\\\(Character(Unicode.Scalar(escaped)))'")
                    }
                    continue
                }
                out.append(byte)
            }
            return String(decoding: out, as: UTF8.self)
        }
    }
}

private extension UInt8 {
    var isBareKeyCharacter: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || self == UInt8(ascii: "_") || self == UInt8(ascii: "-")
    }
}

private extension String {
    var replacingUnderscores: String { String(filter { $0 != "_" }) }
}
