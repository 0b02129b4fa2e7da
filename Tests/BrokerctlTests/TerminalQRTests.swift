import Foundation
import XCTest

@testable import brokerctl

/// brokerctl's QR renderer: the text it draws, read back module by module, is libqrencode's symbol with a light
/// quiet zone of four modules on every side, in both styles; and zbarimg (a real decoder) reads the address back.
final class TerminalQRTests: XCTestCase {
    let address = "https://login.example.org/o/device"

    func testHalfBlocksAreTheSymbolWithItsQuietZoneTwoRowsPerLine() throws {
        let symbol = try QRSymbol.encode(address)
        let text = TerminalQR.render(symbol, style: .halfBlocks)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let side = symbol.width + 2 * TerminalQR.quietZone
        XCTAssertEqual(lines.count, (side + 1) / 2, "two module rows per line")
        for line in lines {
            XCTAssertTrue(line.hasPrefix(TerminalQR.darkOnLight) && line.hasSuffix(TerminalQR.reset),
                          "each line sets dark on light and resets: \(line.debugDescription)")
            XCTAssertEqual(visible(line).count, side, "one column per module")
            XCTAssertTrue(visible(line).allSatisfy { " ▀▄█".contains($0) }, String(line))
        }
        let modules = halfBlockModules(lines)
        assertMatches(modules, symbol)
        XCTAssertEqual(modules.count, side + 1, "the odd last row's lower half is light")
        XCTAssertEqual(modules.last, Array(repeating: false, count: side))
    }

    func testASCIIIsTheSymbolWithItsQuietZoneTwoColumnsPerModule() throws {
        let symbol = try QRSymbol.encode(address)
        let text = TerminalQR.render(symbol, style: .ascii)
        XCTAssertTrue(text.unicodeScalars.allSatisfy(\.isASCII))
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let side = symbol.width + 2 * TerminalQR.quietZone
        XCTAssertEqual(lines.count, side, "one module row per line")
        let modules = lines.map { line -> [Bool] in
            let characters = Array(visible(line))
            XCTAssertEqual(characters.count, 2 * side, "two columns per module")
            return stride(from: 0, to: characters.count - 1, by: 2).map { index in
                let module = String(characters[index...index + 1])
                XCTAssertTrue(module == "##" || module == "  ", "not a module: \(module.debugDescription)")
                return module == "##"
            }
        }
        assertMatches(modules, symbol)
    }

    func testTheQuietZoneIsLightAndTheFinderPatternsAreInTheCorners() throws {
        let symbol = try QRSymbol.encode(address)
        XCTAssertEqual((symbol.width - 17) % 4, 0, "a QR code is 17 + 4 × version modules wide: \(symbol.width)")
        for offset in 1...TerminalQR.quietZone {
            for index in -offset..<(symbol.width + offset) {
                XCTAssertFalse(symbol.isDark(row: -offset, column: index) || symbol.isDark(row: index, column: -offset)
                               || symbol.isDark(row: symbol.width - 1 + offset, column: index))
            }
        }
        // Each finder pattern's outer ring is dark: top-left, top-right and bottom-left corners.
        for (row, column) in [(0, 0), (0, symbol.width - 7), (symbol.width - 7, 0)] {
            for step in 0..<7 {
                XCTAssertTrue(symbol.isDark(row: row, column: column + step) && symbol.isDark(row: row + step, column: column))
            }
        }
    }

    func testARealDecoderReadsTheAddressBack() throws {
        let zbarimg = "/usr/bin/zbarimg"
        guard FileManager.default.isExecutableFile(atPath: zbarimg) else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                XCTFail("zbarimg is missing; scripts/install-deps.sh installs zbar-tools")
            }
            throw XCTSkip("zbarimg is missing (apt-get install zbar-tools)")
        }
        let complete = address + "?user_code=WDJB-MJHT"
        let symbol = try QRSymbol.encode(complete)
        let modules = halfBlockModules(TerminalQR.render(symbol, style: .halfBlocks).split(separator: "\n"))
        let image = FileManager.default.temporaryDirectory.appendingPathComponent("brokerctl-qr-\(getpid()).pbm")
        defer { try? FileManager.default.removeItem(at: image) }
        try portableBitmap(modules, scale: 6).write(to: image, atomically: true, encoding: .ascii)
        let decoder = Process()
        decoder.executableURL = URL(fileURLWithPath: zbarimg)
        decoder.arguments = ["--quiet", "--raw", image.path]
        let output = Pipe()
        decoder.standardOutput = output
        try decoder.run()
        let decoded = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        decoder.waitUntilExit()
        XCTAssertEqual(decoder.terminationStatus, 0)
        XCTAssertEqual(decoded.trimmingCharacters(in: .newlines), complete)
    }

    func testBadInputIsAClearError() {
        XCTAssertThrowsError(try QRSymbol.encode("")) { XCTAssertTrue("\($0)".contains("empty"), "\($0)") }
        XCTAssertThrowsError(try QRSymbol.encode(String(repeating: "x", count: 4000))) {
            XCTAssertTrue("\($0)".contains("too long"), "\($0)")
        }
    }

    func testTheLocaleChoosesTheStyleAsPOSIXDoes() {
        func style(_ variables: [String: String]) -> QRStyle { QRStyle.forLocale { variables[$0] } }
        XCTAssertEqual(style(["LANG": "en_US.UTF-8"]), .halfBlocks)
        XCTAssertEqual(style(["LANG": "C.utf8"]), .halfBlocks)
        XCTAssertEqual(style([:]), .ascii)
        XCTAssertEqual(style(["LANG": "C"]), .ascii)
        XCTAssertEqual(style(["LANG": "en_US.UTF-8", "LC_ALL": "C"]), .ascii, "LC_ALL wins")
        XCTAssertEqual(style(["LANG": "C", "LC_CTYPE": "de_DE.UTF-8"]), .halfBlocks, "LC_CTYPE before LANG")
        XCTAssertEqual(style(["LANG": "en_US.UTF-8", "LC_ALL": ""]), .halfBlocks, "an empty variable does not count")
    }

    // MARK: reading the text back

    private func visible(_ line: Substring) -> String {
        line.replacingOccurrences(of: #"\x1B\[[0-9;]*m"#, with: "", options: .regularExpression)
    }

    private func halfBlockModules(_ lines: [Substring]) -> [[Bool]] {
        lines.flatMap { line -> [[Bool]] in
            let characters = Array(visible(line))
            return [characters.map { $0 == "▀" || $0 == "█" }, characters.map { $0 == "▄" || $0 == "█" }]
        }
    }

    private func assertMatches(_ modules: [[Bool]], _ symbol: QRSymbol, file: StaticString = #filePath, line: UInt = #line) {
        let zone = TerminalQR.quietZone
        for (row, cells) in modules.enumerated() {
            for (column, dark) in cells.enumerated() where dark != symbol.isDark(row: row - zone, column: column - zone) {
                return XCTFail("module (\(row - zone), \(column - zone)) differs", file: file, line: line)
            }
        }
    }

    /// Plain PBM (P1), each module `scale` × `scale` pixels, 1 for dark.
    private func portableBitmap(_ modules: [[Bool]], scale: Int) -> String {
        let width = (modules.first?.count ?? 0) * scale
        let rows = modules.flatMap { row in
            Array(repeating: row.flatMap { Array(repeating: $0 ? "1" : "0", count: scale) }.joined(separator: " "), count: scale)
        }
        return "P1\n\(width) \(rows.count)\n" + rows.joined(separator: "\n") + "\n"
    }
}
