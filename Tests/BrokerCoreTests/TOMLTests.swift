@testable import BrokerConfig
import Foundation
import XCTest

/// The TOML 1.0.0 reader. Fixtures/toml holds a corpus written section by section from the specification:
/// `valid/NAME.toml` with `NAME.json` (what Python's tomllib reads, in the tagged form below) and `invalid/NAME.toml`
/// (which tomllib refuses too). Deliberate differences from tomllib, both per the specification: `spec-*` accept
/// a leap second and year 0000, `limit-*` exceed brokerd's nesting limit, and integers outside Int64 are refused.
final class TOMLTests: XCTestCase {
    private func fixtures(_ folder: String) throws -> [URL] {
        let directory = try XCTUnwrap(Bundle.module.url(forResource: "toml", withExtension: nil, subdirectory: "Fixtures"))
            .appendingPathComponent(folder)
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        return files.filter { $0.pathExtension == "toml" }.sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    private func text(_ url: URL) throws -> String {
        String(decoding: try Data(contentsOf: url), as: UTF8.self)
    }

    func testValidFixtures() throws {
        let files = try fixtures("valid")
        XCTAssertGreaterThan(files.count, 150)
        for file in files {
            let name = file.lastPathComponent
            let expected = try JSONSerialization.jsonObject(
                with: try Data(contentsOf: file.deletingPathExtension().appendingPathExtension("json")))
            do {
                let table = try TOML.parse(try text(file))
                XCTAssertTrue(Self.matches(.table(table), expected), "\(name): read differently from \(name).json")
            } catch {
                XCTFail("\(name): \(error)")
            }
        }
    }

    func testInvalidFixtures() throws {
        let files = try fixtures("invalid")
        XCTAssertGreaterThan(files.count, 250)
        for file in files {
            XCTAssertThrowsError(try TOML.parse(try text(file)), "\(file.lastPathComponent) was accepted") { error in
                let error = error as? TOMLError
                XCTAssertGreaterThan(error?.line ?? 0, 0, file.lastPathComponent)
                XCTAssertNotNil(error?.column, file.lastPathComponent)
                XCTAssertFalse(error?.message.isEmpty ?? true, file.lastPathComponent)
            }
        }
    }

    /// The fixtures' JSON: tables are objects, arrays are arrays, and every other value is
    /// `{"type": …, "value": "text"}` (dates in one canonical form, floats as text).
    static func matches(_ value: TOMLValue, _ json: Any) -> Bool {
        switch value {
        case .table(let table):
            guard let object = json as? [String: Any], object.count == table.entries.count else { return false }
            return table.entries.allSatisfy { entry in object[entry.key].map { matches(entry.value, $0) } ?? false }
        case .array(let items):
            guard let array = json as? [Any], array.count == items.count else { return false }
            return zip(items, array).allSatisfy { matches($0, $1) }
        default:
            guard let tagged = json as? [String: Any], let type = tagged["type"] as? String,
                  let text = tagged["value"] as? String else { return false }
            return matchesScalar(value, type: type, text: text)
        }
    }

    private static func matchesScalar(_ value: TOMLValue, type: String, text: String) -> Bool {
        switch value {
        case .string(let s): return type == "string" && s == text
        case .integer(let i): return type == "integer" && String(i) == text
        case .bool(let b): return type == "bool" && String(b) == text
        case .float(let d):
            guard type == "float", let e = Double(text) else { return false }
            return d.isNaN ? e.isNaN : d == e && d.sign == e.sign
        case .dateTime(let dateTime): return canonical(dateTime) == (type, text)
        case .array, .table: return false
        }
    }

    /// Microseconds always written, `+00:00` for Z, `T` between date and time.
    static func canonical(_ value: TOMLDateTime) -> (String, String) {
        func pad(_ n: Int, _ width: Int) -> String {
            String(repeating: "0", count: max(0, width - String(n).count)) + String(n)
        }
        var parts: [String] = []
        if let d = value.date { parts.append("\(pad(d.year, 4))-\(pad(d.month, 2))-\(pad(d.day, 2))") }
        if let t = value.time {
            parts.append("\(pad(t.hour, 2)):\(pad(t.minute, 2)):\(pad(t.second, 2)).\(pad(t.nanosecond / 1000, 6))")
        }
        var text = parts.joined(separator: "T")
        if let o = value.offsetMinutes { text += "\(o < 0 ? "-" : "+")\(pad(abs(o) / 60, 2)):\(pad(abs(o) % 60, 2))" }
        let type = switch value.kind {
        case .offsetDateTime: "datetime"
        case .localDateTime: "datetime-local"
        case .localDate: "date-local"
        case .localTime: "time-local"
        }
        return (type, text)
    }

    // MARK: - Errors

    private func error(_ text: String) -> TOMLError? {
        do {
            _ = try TOML.parse(text)
            return nil
        } catch {
            return error
        }
    }

    func testErrorsNameLineAndColumn() {
        let duplicate = error("a = 1\n\n  a = 2\n")
        XCTAssertEqual(duplicate?.line, 3)
        XCTAssertEqual(duplicate?.column, 3)
        XCTAssertEqual(duplicate?.description, "line 3, column 3: 'a' is set twice")
        XCTAssertEqual(error("s = \"é\\q\"")?.column, 7, "columns count characters, not bytes")
        XCTAssertEqual(error("a = [\n  1,\n  2\n  3\n]")?.description, "line 4, column 3: expected ',' or ']' in the array, found '3'")
        XCTAssertEqual(error("a = \"\"\"\nx\ny")?.description, "line 1, column 5: unterminated multi-line string (no closing \"\"\")")
        XCTAssertEqual(error("[a]\nb = 1\n[a]")?.description, "line 3, column 1: table [a] appears twice")
        XCTAssertEqual(error("a = 0x1_0000_0000_0000_0000")?.message, "'0x1_0000_0000_0000_0000' does not fit in a 64-bit integer")
        XCTAssertEqual(error("d = 2023-02-29")?.message, "'2023-02-29': 2023-02 has 28 days")
        XCTAssertEqual(error("a = {b = 1}\n[a]\n")?.message, "'a' is an inline table (line 1) and cannot be extended")
        XCTAssertEqual(error("[x]\ny.z = 1\n[x.y]\n")?.message, "table [x.y] was already defined with dotted keys on line 2")
        XCTAssertEqual(error("\u{FEFF}a = 1")?.message,
                       "expected a key, found a byte order mark (U+FEFF); save the file without one")
    }

    /// Equality ignores the column, so expectations written as `TOMLError(line:message:)` keep working.
    func testErrorEqualityIgnoresColumn() {
        XCTAssertEqual(TOMLError(line: 2, column: 7, message: "m"), TOMLError(line: 2, message: "m"))
        XCTAssertNotEqual(TOMLError(line: 2, message: "m"), TOMLError(line: 3, message: "m"))
        XCTAssertEqual(TOMLError(line: 2, message: "m").description, "line 2: m")
    }

    func testDeepNestingIsRefusedNotACrash() {
        let deep = 100_000
        for text in ["a = " + String(repeating: "[", count: deep), "a = " + String(repeating: "{a=", count: deep),
                     "a" + String(repeating: ".a", count: deep) + " = 1", "[a" + String(repeating: ".a", count: deep) + "]",
                     String(repeating: "[", count: deep)] {
            XCTAssertNotNil(error(text))
        }
        XCTAssertEqual(error("a = " + String(repeating: "[", count: 129) + String(repeating: "]", count: 129))?.message,
                       "nested more than 128 levels deep (tables and arrays)")
        XCTAssertNil(error("a = " + String(repeating: "[", count: 128) + String(repeating: "]", count: 128)))
    }

    // MARK: - Values

    func testScalars() throws {
        let table = try TOML.parse("""
            min = -9_223_372_036_854_775_808
            max = 0x7FFF_FFFF_FFFF_FFFF
            bits = 0b1010
            perms = 0o755
            f = -6.626e-34
            big = 1e400
            n = -nan
            s = "tab\\there \\u00E9 \\U0001F600"
            lit = 'C:\\path'
            ml = \"\"\"
            one \\
              two\"\"\"
            """)
        XCTAssertEqual(table["min"], .integer(.min))
        XCTAssertEqual(table["max"], .integer(.max))
        XCTAssertEqual(table["bits"], .integer(10))
        XCTAssertEqual(table["perms"], .integer(493))
        XCTAssertEqual(table["f"], .float(-6.626e-34))
        XCTAssertEqual(table["big"], .float(.infinity))
        guard case .float(let n) = table["n"] else { return XCTFail("nan") }
        XCTAssertTrue(n.isNaN)
        XCTAssertEqual(table["s"], .string("tab\there é 😀"))
        XCTAssertEqual(table["lit"], .string("C:\\path"))
        XCTAssertEqual(table["ml"], .string("one two"))
    }

    func testDatesKeepFieldsAndText() throws {
        let table = try TOML.parse("odt = 1979-05-27 00:32:00.999999999-07:30\nld = 1979-05-27\nlt = 07:32:00\nldt = 1979-05-27T07:32:00")
        guard case .dateTime(let odt) = table["odt"] else { return XCTFail("odt") }
        XCTAssertEqual(odt.kind, .offsetDateTime)
        XCTAssertEqual(odt.date, TOMLDateTime.LocalDate(year: 1979, month: 5, day: 27))
        XCTAssertEqual(odt.time, TOMLDateTime.LocalTime(hour: 0, minute: 32, second: 0, nanosecond: 999_999_999))
        XCTAssertEqual(odt.offsetMinutes, -450)
        XCTAssertEqual(odt.text, "1979-05-27 00:32:00.999999999-07:30")
        guard case .dateTime(let ld) = table["ld"], case .dateTime(let lt) = table["lt"],
              case .dateTime(let ldt) = table["ldt"] else { return XCTFail("kinds") }
        XCTAssertEqual([ld.kind, lt.kind, ldt.kind], [.localDate, .localTime, .localDateTime])
    }

    /// Headers, dotted keys and inline tables build the same tree; each table remembers how it was made.
    func testTablesFromHeadersDottedKeysAndInlineTablesAreEqual() throws {
        let headers = try TOML.parse("[p.g]\nid = \"x\"\nscopes = [\"a\"]\n")
        let dotted = try TOML.parse("p.g.id = \"x\"\np.g.scopes = [\"a\"]\n")
        let inline = try TOML.parse("[p]\ng = { id = \"x\", scopes = [ \"a\", ] }\n")
        XCTAssertEqual(headers, dotted)
        XCTAssertEqual(headers, inline)
        guard case .table(let p) = headers["p"], case .table(let g) = p["g"] else { return XCTFail("tables") }
        XCTAssertEqual(p.origin, .implicit)
        XCTAssertEqual(g.origin, .header)
        XCTAssertEqual(g.line, 1)
        XCTAssertEqual(g.entries.map(\.line), [2, 3])
        guard case .table(let ip) = inline["p"], case .table(let ig) = ip["g"] else { return XCTFail("inline") }
        XCTAssertEqual([ip.origin, ig.origin], [.header, .inline])
    }

    func testArrayOfTables() throws {
        let table = try TOML.parse("[[f]]\nname = \"apple\"\n[f.physical]\ncolor = \"red\"\n[[f]]\nname = \"banana\"\n")
        guard case .array(let fruits) = table["f"], fruits.count == 2, case .table(let apple) = fruits[0] else {
            return XCTFail("array of tables")
        }
        XCTAssertEqual(apple["name"], .string("apple"))
        XCTAssertEqual(apple.line, 1)
        XCTAssertEqual(apple["physical"], .table(TOMLTable(entries: [.init(key: "color", value: .string("red"), line: 4)])))
    }

    func testDottedKeyQuotesWhatIsNotBare() {
        XCTAssertEqual(TOML.dottedKey(["profile", "azure cli", "a.b", "", "x_1-2"]), #"profile."azure cli"."a.b"."".x_1-2"#)
    }
}
