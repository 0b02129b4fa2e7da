import ArgumentParser
import CQRencode

#if canImport(Glibc)
import Glibc
#endif

/// A QR code symbol as libqrencode made it: `width` × `width` modules, row by row, `true` for a dark module.
struct QRSymbol: Equatable, Sendable {
    let width: Int
    let dark: [Bool]

    /// Outside the symbol (the quiet zone and beyond) every module is light.
    func isDark(row: Int, column: Int) -> Bool {
        guard (0..<width).contains(row), (0..<width).contains(column) else { return false }
        return dark[row * width + column]
    }

    /// Byte mode, the smallest version that holds `text`, error correction level L: an address shown on a screen is
    /// not smudged or torn, and L keeps the symbol small enough for an 80 × 24 terminal.
    static func encode(_ text: String) throws -> QRSymbol {
        guard !text.isEmpty else { throw QREncodingFailure("the text is empty") }
        guard !text.utf8.contains(0) else { throw QREncodingFailure("the text contains a NUL character") }
        errno = 0
        guard let code = QRcode_encodeString8bit(text, 0, QR_ECLEVEL_L) else {
            let reason = errno == ERANGE ? "the text is too long for a QR code (\(text.utf8.count) bytes)"
                : "libqrencode failed: " + String(cString: strerror(errno))
            throw QREncodingFailure(reason)
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        // Bit 0 of each byte is the module's colour (1: dark); the other bits say which part of the symbol it is.
        let modules = UnsafeBufferPointer(start: code.pointee.data, count: width * width)
        return QRSymbol(width: width, dark: modules.map { $0 & 1 == 1 })
    }
}

struct QREncodingFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// How a QR code is drawn in a terminal.
enum QRStyle: Sendable, Equatable {
    /// Unicode half blocks (▀ ▄ █): two module rows per line, one column per module. Needs a UTF-8 terminal.
    case halfBlocks
    /// ASCII only: one module row per line, two columns per module ("##" dark, spaces light), twice as tall.
    case ascii

    /// Half blocks when the locale's character set is UTF-8, else ASCII. The locale is read as POSIX does: the first
    /// of LC_ALL, LC_CTYPE and LANG that is set and not empty (a shell over SSH without a forwarded locale is "C").
    static func forLocale(_ variable: (String) -> String?) -> QRStyle {
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"].lazy.compactMap(variable).first { !$0.isEmpty } ?? ""
        let lowered = locale.lowercased()
        return lowered.contains("utf-8") || lowered.contains("utf8") ? .halfBlocks : .ascii
    }

    static func current() -> QRStyle { forLocale { getenv($0).map { String(cString: $0) } } }
}

/// A QR code as terminal text. A scanner wants dark modules on a light ground with a light quiet zone around them,
/// and a terminal's own colours may be either way round (light text on black is common). So the colours are set, not
/// assumed: each line sets black foreground on white background (SGR 30;47) and resets at its end, and "dark" is the
/// foreground colour of the block characters.
enum TerminalQR {
    /// The light border the QR specification requires on every side, in modules.
    static let quietZone = 4
    static let darkOnLight = "\u{1B}[30;47m"
    /// ASCII style: a dark module is drawn black on black, so that it is solid where colours work and still "##"
    /// where they do not.
    static let darkOnDark = "\u{1B}[30;40m"
    static let reset = "\u{1B}[0m"

    /// The lines of the QR code of `symbol`, quiet zone included, joined by newlines (no newline at the end).
    static func render(_ symbol: QRSymbol, style: QRStyle) -> String {
        let span = -quietZone..<(symbol.width + quietZone)
        switch style {
        case .halfBlocks:
            // The last line's lower half lies below the quiet zone when the rows are odd (always: widths are odd).
            return stride(from: span.lowerBound, to: span.upperBound, by: 2).map { row in
                darkOnLight + String(span.map { column -> Character in
                    switch (symbol.isDark(row: row, column: column), symbol.isDark(row: row + 1, column: column)) {
                    case (true, true): return "█"
                    case (true, false): return "▀"
                    case (false, true): return "▄"
                    case (false, false): return " "
                    }
                }) + reset
            }.joined(separator: "\n")
        case .ascii:
            return span.map { row in
                var line = "", current: Bool?
                for column in span {
                    let dark = symbol.isDark(row: row, column: column)
                    if dark != current { line += dark ? darkOnDark : darkOnLight }
                    current = dark
                    line += dark ? "##" : "  "
                }
                return line + reset
            }.joined(separator: "\n")
        }
    }

    /// The QR code of `address` in the current locale's style; nil (and a note on standard error) when it cannot be
    /// encoded: the address is printed anyway, so a sign-in never fails for want of its QR code.
    static func text(for address: String, style: QRStyle = .current()) -> String? {
        do {
            return render(try QRSymbol.encode(address), style: style)
        } catch {
            printError("brokerctl: no QR code for the sign-in address: \(error)")
            return nil
        }
    }
}

/// `--qr` / `--no-qr`: whether the sign-in address is also shown as a QR code (for a phone, when this shell is on SSH).
struct QROptions: ParsableArguments {
    @Flag(inversion: .prefixedNo,
          help: "Also show the sign-in address as a QR code to scan with a phone (default: when the output is a terminal).")
    var qr: Bool?

    /// Forced by --qr or --no-qr; otherwise only when `descriptor`, where the QR code would go, is a terminal.
    func shows(on descriptor: Int32) -> Bool { qr ?? (isatty(descriptor) == 1) }
}
