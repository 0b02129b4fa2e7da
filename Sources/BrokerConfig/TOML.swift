/// A reader of TOML 1.0.0 (https://toml.io/en/v1.0.0), written from the specification on the standard library
/// alone: brokerd must not link Foundation. Every refusal is a `TOMLError` naming the line and column.
public enum TOML {
    /// Arrays, inline tables and tables (including those made by headers and dotted keys) nest at most this deep.
    /// The parser, the value tree's equality and its deallocation all recurse, so a bound keeps a hostile
    /// `a=[[[[…` or `a.a.a.a…=1` a refusal instead of a stack overflow.
    public static let maximumDepth = 128

    /// The document's root table.
    public static func parse(_ text: String) throws(TOMLError) -> TOMLTable {
        var parser = TOMLParser(text)
        return try parser.parseDocument()
    }

    /// A key path as it would be written in TOML (`profile."azure cli".scopes`), for messages.
    public static func dottedKey(_ parts: some Sequence<String>) -> String {
        parts.map { part in
            if !part.isEmpty && part.utf8.allSatisfy(\.isBareKeyByte) { return part }
            var quoted = "\""
            for scalar in part.unicodeScalars {
                switch scalar {
                case "\"": quoted += "\\\""
                case "\\": quoted += "\\\\"
                case "\n": quoted += "\\n"
                case "\t": quoted += "\\t"
                default:
                    quoted += scalar.value < 0x20 || scalar.value == 0x7F ? scalar.tomlEscape : String(scalar)
                }
            }
            return quoted + "\""
        }.joined(separator: ".")
    }
}

public enum TOMLValue: Equatable, Sendable {
    case string(String)
    case integer(Int64)
    case float(Double)
    case bool(Bool)
    /// Offset date-time, local date-time, local date or local time.
    case dateTime(TOMLDateTime)
    /// A static array `[…]` or an array of tables `[[…]]` (then every element is a `.table`).
    case array([TOMLValue])
    case table(TOMLTable)

    /// How messages name the type: "a string", "an integer", …
    public var typeDescription: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .float: "a float"
        case .bool: "a boolean"
        case .dateTime(let value): value.kind.description
        case .array: "an array"
        case .table(let table): table.origin == .inline ? "an inline table" : "a table"
        }
    }
}

public struct TOMLTable: Sendable, Equatable {
    /// How the table came to be; configuration readers word their messages after it.
    public enum Origin: Sendable, Equatable {
        case root
        /// `[name]`, or one element of `[[name]]`.
        case header
        /// Only named as the parent of a header (`a` in `[a.b]`), never defined itself.
        case implicit
        /// Created by a dotted key (`a` in `a.b = 1`).
        case dottedKeys
        /// `{ … }`, or a table made by dotted keys inside one.
        case inline
    }

    public struct Entry: Sendable, Equatable {
        public var key: String
        public var value: TOMLValue
        /// The line of the key, or of the header that defined the table (for an implicit table, the first header
        /// that named it).
        public var line: Int

        public init(key: String, value: TOMLValue, line: Int) {
            self.key = key
            self.value = value
            self.line = line
        }
    }

    public var origin: Origin
    /// The line of the header, of the first dotted key naming it, or of the `{` (0 for the root).
    public var line: Int
    /// In the order the keys first appear in the file.
    public var entries: [Entry]

    public init(origin: Origin = .inline, line: Int = 0, entries: [Entry] = []) {
        self.origin = origin
        self.line = line
        self.entries = entries
    }

    public subscript(key: String) -> TOMLValue? {
        entries.first { $0.key == key }?.value
    }

    /// The same keys with equal values, whatever their order, lines or origin: TOML tables are unordered.
    public static func == (lhs: TOMLTable, rhs: TOMLTable) -> Bool {
        guard lhs.entries.count == rhs.entries.count else { return false }
        return lhs.entries.allSatisfy { entry in rhs[entry.key] == entry.value }
    }
}

/// A date and/or time as TOML writes it, kept as fields and text: no Foundation `Date`, and local values have no
/// instant anyway.
public struct TOMLDateTime: Sendable, Equatable, CustomStringConvertible {
    public struct LocalDate: Sendable, Equatable {
        public var year: Int
        public var month: Int
        public var day: Int
    }

    public struct LocalTime: Sendable, Equatable {
        public var hour: Int
        public var minute: Int
        /// 0...60 (RFC 3339 allows a leap second).
        public var second: Int
        /// Digits past nanoseconds are truncated, as the specification asks.
        public var nanosecond: Int
    }

    public enum Kind: Sendable, Equatable, CustomStringConvertible {
        case offsetDateTime, localDateTime, localDate, localTime

        public var description: String {
            switch self {
            case .offsetDateTime: "an offset date-time"
            case .localDateTime: "a local date-time"
            case .localDate: "a local date"
            case .localTime: "a local time"
            }
        }
    }

    public var date: LocalDate?
    public var time: LocalTime?
    /// Minutes east of UTC (`Z` is 0); nil for local values.
    public var offsetMinutes: Int?
    /// As written in the file.
    public var text: String

    public var kind: Kind {
        switch (date, time) {
        case (.some, .some): offsetMinutes == nil ? .localDateTime : .offsetDateTime
        case (.some, nil): .localDate
        default: .localTime
        }
    }

    public var description: String { text }

    /// Equal fields: `1979-05-27T07:32:00Z` equals `1979-05-27 07:32:00z`.
    public static func == (lhs: TOMLDateTime, rhs: TOMLDateTime) -> Bool {
        lhs.date == rhs.date && lhs.time == rhs.time && lhs.offsetMinutes == rhs.offsetMinutes
    }
}

public struct TOMLError: Error, CustomStringConvertible, Sendable, Equatable {
    public var line: Int
    /// 1-based, in Unicode scalars; nil for errors about a whole entry (a configuration reader's).
    public var column: Int?
    public var message: String

    public var description: String {
        if let column { return "line \(line), column \(column): \(message)" }
        return "line \(line): \(message)"
    }

    public init(line: Int, column: Int? = nil, message: String) {
        self.line = line
        self.column = column
        self.message = message
    }

    /// Line and message only: the column is a pointer for people, and expectations written as
    /// `TOMLError(line:message:)` should not depend on it.
    public static func == (lhs: TOMLError, rhs: TOMLError) -> Bool {
        lhs.line == rhs.line && lhs.message == rhs.message
    }
}

extension UInt8 {
    var isBareKeyByte: Bool {
        (0x61...0x7A).contains(self) || (0x41...0x5A).contains(self) || (0x30...0x39).contains(self)
            || self == 0x5F || self == 0x2D
    }
}

extension Unicode.Scalar {
    /// `\u001F`: how messages show a character that would be invisible or break the line.
    var tomlEscape: String {
        let hex = String(value, radix: 16, uppercase: true)
        let width = value > 0xFFFF ? 8 : 4
        return (value > 0xFFFF ? "\\U" : "\\u") + String(repeating: "0", count: max(0, width - hex.count)) + hex
    }
}
