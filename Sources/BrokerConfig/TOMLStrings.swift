/// The four kinds of TOML string. The text is valid UTF-8 (it came from a `String`) and escapes add only valid
/// scalars, so the bytes collected here always decode cleanly.
extension TOMLParser {
    /// `"…"`: escapes, one line.
    mutating func parseBasicString() throws(TOMLError) -> String {
        let open = mark
        position += 1
        var out: [UInt8] = []
        while true {
            guard let byte = peek, byte != .lineFeed, !(byte == .carriageReturn && peek(1) == .lineFeed) else {
                throw error("unterminated string", at: open)
            }
            switch byte {
            case .quote:
                position += 1
                return String(decoding: out, as: UTF8.self)
            case .backslash:
                try appendEscape(to: &out)
            default:
                if byte.isForbiddenControl { throw error(controlCharacterMessage(byte, in: "a string") + "; escape it") }
                out.append(byte)
                position += 1
            }
        }
    }

    /// `'…'`: no escapes, one line.
    mutating func parseLiteralString() throws(TOMLError) -> String {
        let open = mark
        position += 1
        let start = position
        while true {
            guard let byte = peek, byte != .lineFeed, !(byte == .carriageReturn && peek(1) == .lineFeed) else {
                throw error("unterminated string", at: open)
            }
            if byte == .apostrophe { break }
            if byte.isForbiddenControl {
                throw error(controlCharacterMessage(byte, in: "a literal string") + "; use a \"basic\" string and escape it")
            }
            position += 1
        }
        defer { position += 1 }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    /// `"""…"""` or `'''…'''`. A line break right after the opening delimiter is dropped; CRLF becomes LF.
    mutating func parseMultilineString() throws(TOMLError) -> String {
        let open = mark
        let delimiter = bytes[position]
        position += 3
        _ = skipNewline()
        var out: [UInt8] = []
        while true {
            guard let byte = peek else {
                let quotes = String(repeating: Character(Unicode.Scalar(delimiter)), count: 3)
                throw error("unterminated multi-line string (no closing \(quotes))", at: open)
            }
            if byte == delimiter {
                if try closeMultilineString(delimiter, appendingTo: &out) { return String(decoding: out, as: UTF8.self) }
            } else if byte == .backslash && delimiter == .quote {
                if !skipLineEndingBackslash() { try appendEscape(to: &out) }
            } else if skipNewline() {
                out.append(.lineFeed)
            } else if byte.isForbiddenControl {
                throw error(controlCharacterMessage(byte, in: "a string") + (delimiter == .quote ? "; escape it" : ""))
            } else {
                out.append(byte)
                position += 1
            }
        }
    }

    /// At a run of delimiter characters: one or two belong to the text; three close the string, and up to two
    /// more before those three still belong to the text (`"""a"""""` is `a""`).
    private mutating func closeMultilineString(_ delimiter: UInt8, appendingTo out: inout [UInt8]) throws(TOMLError) -> Bool {
        var run = 0
        while peek(run) == delimiter { run += 1 }
        if run > 5 {
            throw error("a multi-line string cannot contain three \(Character(Unicode.Scalar(delimiter))) in a row; escape one")
        }
        out.append(contentsOf: repeatElement(delimiter, count: run < 3 ? run : run - 3))
        position += run
        return run >= 3
    }

    /// A `\` that is the last thing on its line (spaces may follow) joins the lines: it, the line break and all
    /// whitespace up to the next other character are dropped.
    private mutating func skipLineEndingBackslash() -> Bool {
        var ahead = 1
        while peek(ahead) == .space || peek(ahead) == .tab { ahead += 1 }
        guard peek(ahead) == .lineFeed || (peek(ahead) == .carriageReturn && peek(ahead + 1) == .lineFeed) else {
            return false
        }
        position += ahead
        while true {
            if peek == .space || peek == .tab {
                position += 1
            } else if !skipNewline() {
                return true
            }
        }
    }

    /// At a `\` in a basic string.
    mutating func appendEscape(to out: inout [UInt8]) throws(TOMLError) {
        let start = mark
        position += 1
        guard let letter = peek else { throw error("unterminated string", at: start) }
        position += 1
        switch letter {
        case 0x62: out.append(0x08)  // \b
        case 0x74: out.append(.tab)  // \t
        case 0x6E: out.append(.lineFeed)  // \n
        case 0x66: out.append(0x0C)  // \f
        case 0x72: out.append(.carriageReturn)  // \r
        case .quote, .backslash: out.append(letter)
        case 0x75, 0x55:  // \uXXXX, \UXXXXXXXX
            let scalar = try readUnicodeEscape(digits: letter == 0x75 ? 4 : 8, start: start)
            UTF8.encode(scalar) { out.append($0) }
        default:
            position -= 1
            if letter == .lineFeed || letter == .carriageReturn {
                throw error("a backslash can end a line only in a multi-line \"\"\" string", at: start)
            }
            let shown = letter.isForbiddenControl || letter >= 0x80
                ? ": a backslash followed by \(letter >= 0x80 ? "a non-ASCII character" : Unicode.Scalar(letter).tomlEscape)"
                : " '\\\(Character(Unicode.Scalar(letter)))'"
            throw error("invalid escape\(shown) (TOML has \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX)", at: start)
        }
    }

    private mutating func readUnicodeEscape(digits: Int, start: Mark) throws(TOMLError) -> Unicode.Scalar {
        var value: UInt32 = 0
        for _ in 0..<digits {
            guard let byte = peek, let digit = byte.hexDigitValue else {
                let form = digits == 4 ? "\\u needs 4" : "\\U needs 8"
                throw error("\(form) hexadecimal digits", at: start)
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        guard let scalar = Unicode.Scalar(value) else {
            let text = String(decoding: bytes[start.position..<position], as: UTF8.self)
            throw error("'\(text)' is not a Unicode scalar value (surrogates and values past 10FFFF are not)", at: start)
        }
        return scalar
    }
}

extension UInt8 {
    var hexDigitValue: UInt8? {
        switch self {
        case 0x30...0x39: self - 0x30
        case 0x41...0x46: self - 0x41 + 10
        case 0x61...0x66: self - 0x61 + 10
        default: nil
        }
    }
}
