/// The TOML grammar: statements, keys, values, arrays and inline tables. Strings are in TOMLStrings.swift, numbers
/// and dates in TOMLScalars.swift, and the rules about which table may be defined or extended in TOMLTree.swift.
///
/// It works on the UTF-8 bytes: every structural character is ASCII, and a `String` is already valid UTF-8.
struct TOMLParser {
    /// A place in the text, kept cheap (no column) because one is taken for every key; the column is counted
    /// only when an error is raised.
    struct Mark {
        var position: Int
        var line: Int
        var lineStart: Int
    }

    /// A dotted key, with where each part starts (errors point at the part at fault).
    struct Key {
        var parts: [String] = []
        var marks: [Mark] = []
    }

    let bytes: [UInt8]
    var position = 0
    var line = 1
    var lineStart = 0

    let root = TableNode(origin: .root, line: 0, depth: 0)
    /// The table of the last `[header]` (the root before any), where key/value lines go.
    var current: TableNode
    var currentPath: [String] = []

    init(_ text: String) {
        bytes = Array(text.utf8)
        current = root
    }

    mutating func parseDocument() throws(TOMLError) -> TOMLTable {
        while true {
            skipWhitespace()
            try skipComment()
            guard position < bytes.count else { break }
            if skipNewline() { continue }
            if peek == .openBracket {
                try parseHeader()
                try expectEndOfLine("unexpected text after the table header")
            } else {
                try parseKeyValue(into: current, path: currentPath)
                try expectEndOfLine("unexpected text after the value")
            }
        }
        return root.frozen()
    }

    // MARK: - Cursor

    var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

    func peek(_ offset: Int) -> UInt8? {
        position + offset < bytes.count ? bytes[position + offset] : nil
    }

    var mark: Mark { Mark(position: position, line: line, lineStart: lineStart) }

    func error(_ message: String, at mark: Mark? = nil) -> TOMLError {
        let at = mark ?? self.mark
        // Count scalars, not bytes: continuation bytes (10xxxxxx) do not start a character.
        var column = 1
        for byte in bytes[at.lineStart..<min(at.position, bytes.count)] where byte & 0xC0 != 0x80 { column += 1 }
        return TOMLError(line: at.line, column: column, message: message)
    }

    mutating func skipWhitespace() {
        while position < bytes.count, bytes[position] == .space || bytes[position] == .tab { position += 1 }
    }

    /// Consumes LF or CRLF and counts the line.
    mutating func skipNewline() -> Bool {
        if peek == .lineFeed {
            position += 1
        } else if peek == .carriageReturn && peek(1) == .lineFeed {
            position += 2
        } else {
            return false
        }
        line += 1
        lineStart = position
        return true
    }

    /// A `#` comment up to (not including) the line break.
    mutating func skipComment() throws(TOMLError) {
        guard peek == .hash else { return }
        position += 1
        while let byte = peek, byte != .lineFeed {
            if byte == .carriageReturn && peek(1) == .lineFeed { break }
            if byte.isForbiddenControl { throw error(controlCharacterMessage(byte, in: "a comment")) }
            position += 1
        }
    }

    /// Between array elements: spaces, comments and line breaks.
    mutating func skipBlankSpace() throws(TOMLError) {
        while true {
            skipWhitespace()
            try skipComment()
            if !skipNewline() { return }
        }
    }

    mutating func expectEndOfLine(_ complaint: String) throws(TOMLError) {
        skipWhitespace()
        try skipComment()
        if position >= bytes.count || skipNewline() { return }
        if let byte = peek, byte.isForbiddenControl { throw error(controlCharacterMessage(byte, in: "the file")) }
        throw error(complaint)
    }

    func controlCharacterMessage(_ byte: UInt8, in place: String) -> String {
        if byte == .carriageReturn { return "a carriage return must be followed by a line feed" }
        return "control character \(Unicode.Scalar(byte).tomlEscape) is not allowed in \(place)"
    }

    /// "expected X, found Y" with Y made visible.
    func unexpected(_ expected: String) -> String {
        guard let byte = peek else { return "expected \(expected), found the end of the file" }
        if byte == .lineFeed || byte == .carriageReturn { return "expected \(expected) before the end of the line" }
        if byte.isForbiddenControl { return "expected \(expected), found \(Unicode.Scalar(byte).tomlEscape)" }
        var end = position + 1
        while end < bytes.count && bytes[end] & 0xC0 == 0x80 { end += 1 }
        let found = String(decoding: bytes[position..<end], as: UTF8.self)
        // Editors add U+FEFF invisibly; TOML does not allow it.
        if found == "\u{FEFF}" { return "expected \(expected), found a byte order mark (U+FEFF); save the file without one" }
        return "expected \(expected), found '\(found)'"
    }

    // MARK: - Statements

    /// `[a.b]` or `[[a.b]]`; makes the table the current one.
    mutating func parseHeader() throws(TOMLError) {
        let start = mark
        position += 1
        let isArray = peek == .openBracket
        if isArray { position += 1 }
        let key = try parseKey()
        let closing = isArray ? "']]' to close the [[array of tables]] header" : "']' to close the [table] header"
        guard peek == .closeBracket, !isArray || peek(1) == .closeBracket else { throw error(unexpected(closing)) }
        position += isArray ? 2 : 1
        current = isArray ? try appendTableArrayElement(key, header: start) : try defineTable(key, header: start)
        currentPath = key.parts
    }

    /// `key = value` into `table` (whose own path is `path`, for messages).
    mutating func parseKeyValue(into table: TableNode, path: [String]) throws(TOMLError) {
        let key = try parseKey()
        guard peek == .equals else { throw error(unexpected("'=' after the key")) }
        position += 1
        skipWhitespace()
        let parent = try dottedKeyParent(key, in: table, path: path)
        try checkUnset(key, in: parent, path: path)
        let value = try parseValue(depth: parent.depth + 1, path: path + key.parts)
        parent.insert(key.parts[key.parts.count - 1], .value(value, line: key.marks[0].line))
    }

    /// A dotted key; whitespace around the dots (and after the key) is skipped.
    mutating func parseKey() throws(TOMLError) -> Key {
        var key = Key()
        while true {
            skipWhitespace()
            key.marks.append(mark)
            key.parts.append(try parseSimpleKey(afterDot: !key.parts.isEmpty))
            skipWhitespace()
            guard peek == .dot else { return key }
            position += 1
        }
    }

    mutating func parseSimpleKey(afterDot: Bool) throws(TOMLError) -> String {
        switch peek {
        case .quote?, .apostrophe?:
            if peek(1) == peek && peek(2) == peek { throw error("a key cannot be a multi-line string") }
            return peek == .quote ? try parseBasicString() : try parseLiteralString()
        case let byte? where byte.isBareKeyByte:
            let start = position
            while let byte = peek, byte.isBareKeyByte { position += 1 }
            return String(decoding: bytes[start..<position], as: UTF8.self)
        default:
            let byteOrderMark = peek == 0xEF && peek(1) == 0xBB && peek(2) == 0xBF
            if let byte = peek, !byteOrderMark, byte >= 0x80 || byte.isBareKeyPunctuation {
                throw error(unexpected("a key") + " (bare keys allow A-Z a-z 0-9 _ -; quote other keys)")
            }
            throw error(unexpected(afterDot ? "a key after '.'" : "a key"))
        }
    }

    // MARK: - Values

    /// `depth` is the nesting the value would have as an array or table.
    mutating func parseValue(depth: Int, path: [String]) throws(TOMLError) -> TOMLValue {
        switch peek {
        case .quote?:
            return .string(peek(1) == .quote && peek(2) == .quote ? try parseMultilineString() : try parseBasicString())
        case .apostrophe?:
            let multiline = peek(1) == .apostrophe && peek(2) == .apostrophe
            return .string(multiline ? try parseMultilineString() : try parseLiteralString())
        case .openBracket?:
            return try parseArray(depth: depth, path: path)
        case .openBrace?:
            return try parseInlineTable(depth: depth, path: path)
        default:
            return try parseBareValue()
        }
    }

    mutating func parseArray(depth: Int, path: [String]) throws(TOMLError) -> TOMLValue {
        let open = mark
        try checkDepth(depth, at: open)
        position += 1
        var items: [TOMLValue] = []
        while true {
            try skipBlankSpace()
            if peek == .closeBracket { break }
            items.append(try parseValue(depth: depth + 1, path: path))
            try skipBlankSpace()
            if peek == .comma {
                position += 1
            } else if peek != .closeBracket {
                let what = peek == nil ? "unterminated array (opened on line \(open.line))" : unexpected("',' or ']' in the array")
                throw error(what)
            }
        }
        position += 1
        return .array(items)
    }

    /// `{ a = 1, b.c = 2 }`: on one line (values such as arrays may span lines), no trailing comma.
    mutating func parseInlineTable(depth: Int, path: [String]) throws(TOMLError) -> TOMLValue {
        let open = mark
        try checkDepth(depth, at: open)
        position += 1
        let table = TableNode(origin: .inline, line: open.line, depth: depth)
        skipWhitespace()
        if peek == .closeBrace {
            position += 1
            return .table(table.frozen(inline: true))
        }
        while true {
            skipWhitespace()
            if peek == .closeBrace { throw error("a trailing comma is not allowed in an inline table") }
            if peek == .lineFeed || peek == .carriageReturn || peek == .hash {
                throw error("an inline table must end on the line it starts (close it with '}')")
            }
            try parseKeyValue(into: table, path: path)
            skipWhitespace()
            if peek == .closeBrace { break }
            guard peek == .comma else {
                if peek == .lineFeed || peek == .carriageReturn || peek == .hash {
                    throw error("an inline table must end on the line it starts (close it with '}')")
                }
                throw error(unexpected("',' or '}' in the inline table"))
            }
            position += 1
        }
        position += 1
        return .table(table.frozen(inline: true))
    }

    func checkDepth(_ depth: Int, at mark: Mark) throws(TOMLError) {
        guard depth <= TOML.maximumDepth else {
            throw error("nested more than \(TOML.maximumDepth) levels deep (tables and arrays)", at: mark)
        }
    }

    /// Booleans, numbers and dates: a run of characters up to a delimiter.
    mutating func parseBareValue() throws(TOMLError) -> TOMLValue {
        let start = mark
        var end = position
        while end < bytes.count, !bytes[end].endsBareValue { end += 1 }
        // "1979-05-27 07:32:00": the one place a value contains a space.
        if end - position == 10, end + 3 < bytes.count, bytes[end] == .space, bytes[end + 3] == .colon,
           bytes[end + 1].isDigit, bytes[end + 2].isDigit, bytes[position + 4] == .minus {
            end += 1
            while end < bytes.count, !bytes[end].endsBareValue { end += 1 }
        }
        guard end > position else { throw error(unexpected("a value")) }
        let word = bytes[position..<end]
        position = end
        do {
            return try TOMLScalar.parse(word)
        } catch {
            throw self.error(error.message, at: start)
        }
    }
}

extension UInt8 {
    static let tab: UInt8 = 0x09, lineFeed: UInt8 = 0x0A, carriageReturn: UInt8 = 0x0D, space: UInt8 = 0x20
    static let quote: UInt8 = 0x22, hash: UInt8 = 0x23, apostrophe: UInt8 = 0x27, plus: UInt8 = 0x2B
    static let comma: UInt8 = 0x2C, minus: UInt8 = 0x2D, dot: UInt8 = 0x2E, colon: UInt8 = 0x3A
    static let equals: UInt8 = 0x3D, openBracket: UInt8 = 0x5B, backslash: UInt8 = 0x5C
    static let closeBracket: UInt8 = 0x5D, underscore: UInt8 = 0x5F, openBrace: UInt8 = 0x7B, closeBrace: UInt8 = 0x7D

    var isDigit: Bool { (0x30...0x39).contains(self) }

    /// Allowed nowhere raw: C0 controls except tab (line breaks are handled by the callers), and DEL.
    var isForbiddenControl: Bool { (self < 0x20 && self != .tab) || self == 0x7F }

    var endsBareValue: Bool {
        switch self {
        case .space, .tab, .lineFeed, .carriageReturn, .comma, .closeBracket, .closeBrace, .hash: true
        default: false
        }
    }

    /// Printable ASCII a user might mistake for part of a bare key (`a/b`, `a:b`, `a@b`).
    var isBareKeyPunctuation: Bool {
        (0x21...0x7E).contains(self) && !isBareKeyByte && ![.quote, .apostrophe, .equals, .dot, .openBracket,
                                                             .closeBracket, .hash, .comma, .openBrace, .closeBrace].contains(self)
    }
}
