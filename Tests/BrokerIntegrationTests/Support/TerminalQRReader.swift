import Foundation
import XCTest

/// Reads a QR code that brokerctl drew in a terminal back into an image and decodes it with zbarimg (zbar-tools), a
/// real decoder: what a phone's camera would read from the screen.
enum TerminalQRReader {
    /// brokerctl starts each line of a QR code with black on white (SGR 30;47).
    static let lineMark = "\u{1B}[30;47m"

    /// The modules (true: dark) of the QR code in `text`, quiet zone included: half blocks (two module rows per
    /// line) or ASCII ("##" dark and two spaces light, one row per line).
    static func modules(in text: String) -> [[Bool]] {
        let lines = text.split(separator: "\n").filter { $0.contains(lineMark) }.map { Array(visible($0)) }
        if lines.contains(where: { $0.contains("#") }) {
            return lines.map { line in stride(from: 0, to: line.count - 1, by: 2).map { line[$0] == "#" } }
        }
        return lines.flatMap { line in [line.map { $0 == "▀" || $0 == "█" }, line.map { $0 == "▄" || $0 == "█" }] }
    }

    /// The text without its SGR colour sequences.
    static func visible(_ line: Substring) -> String {
        line.replacingOccurrences(of: #"\x1B\[[0-9;]*m"#, with: "", options: .regularExpression)
    }

    /// What zbarimg reads from the QR code in `text`, drawn as a plain PBM with each module 6 × 6 pixels and no
    /// margin beyond the quiet zone brokerctl drew.
    static func decode(_ text: String, zbarimg: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let modules = modules(in: text)
        guard let width = modules.first?.count, width > 0, modules.allSatisfy({ $0.count == width }) else {
            XCTFail("no rectangular QR code in the text: \(text.debugDescription)", file: file, line: line)
            return ""
        }
        let scale = 6
        let rows = modules.flatMap { row in
            Array(repeating: row.flatMap { Array(repeating: $0 ? "1" : "0", count: scale) }.joined(separator: " "), count: scale)
        }
        let directory = TemporaryDirectory("brokerd-qr")
        let image = directory.path + "/qr.pbm"
        try ("P1\n\(width * scale) \(rows.count)\n" + rows.joined(separator: "\n") + "\n").write(toFile: image, atomically: true,
                                                                                                  encoding: .ascii)
        let decoded = try runCommand(zbarimg, ["--quiet", "--raw", image])
        XCTAssertEqual(decoded.status, 0, "zbarimg found no QR code: \(decoded.stderr)", file: file, line: line)
        return decoded.stdout.trimmingCharacters(in: .newlines)
    }
}
