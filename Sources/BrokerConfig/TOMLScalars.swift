/// Booleans, integers, floats and dates: each is read from the run of characters up to the next delimiter, then
/// checked against the specification's grammar, which is strict (no leading zeros, underscores only between
/// digits, `0x` only in lower case, seconds required in times, …).
enum TOMLScalar {
    struct Failure: Error {
        var message: String
    }

    static func parse(_ word: ArraySlice<UInt8>) throws(Failure) -> TOMLValue {
        if word.elementsEqual("true".utf8) { return .bool(true) }
        if word.elementsEqual("false".utf8) { return .bool(false) }
        let first = word[word.startIndex]
        // Numbers never contain ':', and "dddd-" can only start a date.
        if first.isDigit && word.contains(.colon)
            || word.count >= 5 && word[word.startIndex + 4] == .minus && word.prefix(4).allSatisfy(\.isDigit) {
            return .dateTime(try dateTime(word))
        }
        if first.isDigit || first == .plus || first == .minus || word.elementsEqual("inf".utf8)
            || word.elementsEqual("nan".utf8) {
            return try number(word)
        }
        throw Failure(message: "\(quoted(word)) is not a value (strings need quotes)")
    }

    /// For messages: the word as written, shortened, with invisible characters escaped.
    static func quoted(_ word: ArraySlice<UInt8>) -> String {
        let text = String(decoding: word.prefix(40), as: UTF8.self)
        var shown = ""
        for scalar in text.unicodeScalars {
            shown += scalar.value < 0x20 || scalar.value == 0x7F ? scalar.tomlEscape : String(scalar)
        }
        return "'\(shown)\(word.count > 40 ? "…" : "")'"
    }

    // MARK: - Numbers

    private static func number(_ word: ArraySlice<UInt8>) throws(Failure) -> TOMLValue {
        var body = word
        let sign = body.first == .plus || body.first == .minus ? body.removeFirst() : nil
        if body.elementsEqual("inf".utf8) { return .float(sign == .minus ? -.infinity : .infinity) }
        if body.elementsEqual("nan".utf8) { return .float(sign == .minus ? -.nan : .nan) }
        if body.count >= 2 && body.first == 0x30, let radix = radix(of: body[body.startIndex + 1]) {
            guard sign == nil else {
                throw Failure(message: "\(quoted(word)): hexadecimal, octal and binary integers cannot have a sign")
            }
            return .integer(try integer(body.dropFirst(2), radix: radix, negative: false, word: word))
        }
        if body.contains(where: { $0 == .dot || $0 == 0x65 || $0 == 0x45 }) {
            return .float(try float(body, negative: sign == .minus, word: word))
        }
        try checkDigits(body, radix: 10, word: word)
        try checkNoLeadingZero(body, word: word)
        return .integer(try integer(body, radix: 10, negative: sign == .minus, word: word))
    }

    private static func radix(of letter: UInt8) -> Int64? {
        switch letter {
        case 0x78: 16  // x
        case 0x6F: 8  // o
        case 0x62: 2  // b
        default: nil
        }
    }

    /// Digits of `radix` with single underscores between them.
    private static func checkDigits(_ digits: ArraySlice<UInt8>, radix: Int64, word: ArraySlice<UInt8>) throws(Failure) {
        guard !digits.isEmpty else { throw Failure(message: "\(quoted(word)) is not a number: digits are missing") }
        var previous: UInt8 = .underscore
        for byte in digits {
            if byte == .underscore {
                guard previous != .underscore else {
                    throw Failure(message: "\(quoted(word)): an underscore must be between two digits")
                }
            } else if byte.hexDigitValue.map({ Int64($0) < radix }) != true {
                throw Failure(message: "\(quoted(word)) is not a valid number")
            }
            previous = byte
        }
        guard previous != .underscore else {
            throw Failure(message: "\(quoted(word)): an underscore must be between two digits")
        }
    }

    private static func checkNoLeadingZero(_ digits: ArraySlice<UInt8>, word: ArraySlice<UInt8>) throws(Failure) {
        if digits.count > 1 && digits.first == 0x30 {
            throw Failure(message: "\(quoted(word)): leading zeros are not allowed")
        }
    }

    /// Accumulated on the negative side, which reaches one further than the positive (-9223372036854775808).
    private static func integer(_ digits: ArraySlice<UInt8>, radix: Int64, negative: Bool,
                                word: ArraySlice<UInt8>) throws(Failure) -> Int64 {
        try checkDigits(digits, radix: radix, word: word)
        let tooBig = Failure(message: "\(quoted(word)) does not fit in a 64-bit integer")
        var value: Int64 = 0
        for byte in digits where byte != .underscore {
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: radix)
            let (next, overflow2) = shifted.subtractingReportingOverflow(Int64(byte.hexDigitValue!))
            guard !overflow1 && !overflow2 else { throw tooBig }
            value = next
        }
        if negative { return value }
        let (positive, overflow) = (0 as Int64).subtractingReportingOverflow(value)
        guard !overflow else { throw tooBig }
        return positive
    }

    /// `int-part [. digits] [e|E [+|-] digits]`, with a fraction or an exponent or both.
    private static func float(_ body: ArraySlice<UInt8>, negative: Bool, word: ArraySlice<UInt8>) throws(Failure) -> Double {
        let isExponentMark: (UInt8) -> Bool = { $0 == 0x65 || $0 == 0x45 }
        let integerEnd = body.firstIndex { $0 == .dot || isExponentMark($0) } ?? body.endIndex
        let integerPart = body[..<integerEnd]
        try checkDigits(integerPart, radix: 10, word: word)
        try checkNoLeadingZero(integerPart, word: word)
        var rest = body[integerEnd...]
        if rest.first == .dot {
            rest.removeFirst()
            let fractionEnd = rest.firstIndex(where: isExponentMark) ?? rest.endIndex
            try checkDigits(rest[..<fractionEnd], radix: 10, word: word)
            rest = rest[fractionEnd...]
        }
        if let mark = rest.first, isExponentMark(mark) {
            rest.removeFirst()
            if rest.first == .plus || rest.first == .minus { rest.removeFirst() }
            try checkDigits(rest, radix: 10, word: word)
        }
        let text = String(decoding: body.filter { $0 != .underscore }, as: UTF8.self)
        guard let value = Double(text) else { throw Failure(message: "\(quoted(word)) is not a valid number") }
        return negative ? -value : value
    }

    // MARK: - Dates and times

    /// `1979-05-27T07:32:00.999-07:00`, `1979-05-27 07:32:00`, `1979-05-27` or `07:32:00`.
    private static func dateTime(_ word: ArraySlice<UInt8>) throws(Failure) -> TOMLDateTime {
        var reader = DigitReader(bytes: word, word: word)
        var value = TOMLDateTime(text: String(decoding: word, as: UTF8.self))
        if !(word.count >= 3 && word[word.startIndex + 2] == .colon) {
            let date = try reader.date()
            guard date.day <= daysIn(month: date.month, year: date.year) else {
                throw Failure(message: "\(quoted(word)): \(String(decoding: word.prefix(7), as: UTF8.self)) has "
                                       + "\(daysIn(month: date.month, year: date.year)) days")
            }
            value.date = date
            guard let separator = reader.next() else { return value }
            guard separator == 0x54 || separator == 0x74 || separator == .space else { throw reader.malformed }  // T t
        }
        value.time = try reader.time()
        if value.date != nil, let zone = reader.next() {
            value.offsetMinutes = try reader.offset(zone)
        }
        guard reader.atEnd else { throw reader.malformed }
        return value
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

/// Fixed-width fields of a date or time, each checked against its range.
private struct DigitReader {
    var bytes: ArraySlice<UInt8>
    let word: ArraySlice<UInt8>

    var atEnd: Bool { bytes.isEmpty }

    var malformed: TOMLScalar.Failure {
        TOMLScalar.Failure(message: "\(TOMLScalar.quoted(word)) is not a valid date or time (RFC 3339: "
                                    + "1979-05-27T07:32:00Z, 1979-05-27T07:32:00, 1979-05-27 or 07:32:00)")
    }

    mutating func next() -> UInt8? { bytes.popFirst() }

    mutating func number(_ width: Int, _ field: String, _ range: ClosedRange<Int>) throws(TOMLScalar.Failure) -> Int {
        guard bytes.count >= width else { throw malformed }
        var value = 0
        for _ in 0..<width {
            let byte = bytes.removeFirst()
            guard byte.isDigit else { throw malformed }
            value = value * 10 + Int(byte - 0x30)
        }
        guard range.contains(value) else {
            let bounds = "\(range.lowerBound < 10 ? "0" : "")\(range.lowerBound) to \(range.upperBound)"
            throw TOMLScalar.Failure(message: "\(TOMLScalar.quoted(word)): the \(field) must be \(bounds)")
        }
        return value
    }

    mutating func expect(_ byte: UInt8) throws(TOMLScalar.Failure) {
        guard bytes.popFirst() == byte else { throw malformed }
    }

    mutating func date() throws(TOMLScalar.Failure) -> TOMLDateTime.LocalDate {
        let year = try number(4, "year", 0...9999)
        try expect(.minus)
        let month = try number(2, "month", 1...12)
        try expect(.minus)
        return TOMLDateTime.LocalDate(year: year, month: month, day: try number(2, "day", 1...31))
    }

    /// Seconds are required; a fraction has at least one digit, and digits past nanoseconds are dropped.
    mutating func time() throws(TOMLScalar.Failure) -> TOMLDateTime.LocalTime {
        let hour = try number(2, "hour", 0...23)
        try expect(.colon)
        let minute = try number(2, "minute", 0...59)
        try expect(.colon)
        let second = try number(2, "second", 0...60)
        var nanosecond = 0
        if bytes.first == .dot {
            bytes.removeFirst()
            guard bytes.first?.isDigit == true else { throw malformed }
            var scale = 100_000_000
            while let byte = bytes.first, byte.isDigit {
                nanosecond += Int(byte - 0x30) * scale
                scale /= 10
                bytes.removeFirst()
            }
        }
        return TOMLDateTime.LocalTime(hour: hour, minute: minute, second: second, nanosecond: nanosecond)
    }

    /// After the time: `Z`, `z` or `±HH:MM`, in minutes east of UTC.
    mutating func offset(_ zone: UInt8) throws(TOMLScalar.Failure) -> Int {
        if zone == 0x5A || zone == 0x7A { return 0 }
        guard zone == .plus || zone == .minus else { throw malformed }
        let hours = try number(2, "offset's hour", 0...23)
        try expect(.colon)
        let minutes = hours * 60 + (try number(2, "offset's minute", 0...59))
        return zone == .minus ? -minutes : minutes
    }
}
