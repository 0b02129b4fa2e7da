import BrokerJSON
import Foundation
import XCTest

/// An export is read by other apps' SDKs: whatever was imported, the real msal-python must load it and run an app's
/// cache work over it without failing. Entries no SDK can read in their section are kept, set aside.
final class ExportReadabilityTests: XCTestCase {
    private let script = TestIdP.root + "/Tests/interop/msal_reads_export.py"

    func testMSALPythonReadsTheExportOfADocumentWithUnreadableEntries() throws {
        let python = try msalPython()
        let daemon = try Daemon()
        try daemon.start()
        let input = daemon.directory.path + "/input.json", export = daemon.directory.path + "/export.json"
        XCTAssertEqual(try runCommand("/usr/bin/python3", [script, "make", input]).status, 0)
        let imported = try daemon.ctl(["import", input])
        XCTAssertEqual(imported.status, 0, imported.stderr)
        XCTAssertEqual(try daemon.ctl(["export", export]).status, 0)

        let read = try runCommand(python, [script, "check", export])
        XCTAssertEqual(read.status, 0, "msal-python failed on the export:\n\(read.stderr)")
        XCTAssertTrue(read.stdout.contains(#""accounts": ["user@example.com"]"#), read.stdout)
        XCTAssertTrue(read.stdout.contains(#""refresh_errors": ["invalid_grant"]"#), "the refresh path ran: \(read.stdout)")

        // Every unreadable entry is still in the export, verbatim, in the set-aside section.
        let document = try XCTUnwrap(try JSONReader.parse(Array(try Data(contentsOf: URL(fileURLWithPath: export)))).objectValue)
        let aside = try XCTUnwrap(document["brokerd_set_aside"]?.objectValue, "no set-aside section")
        let expected = ["AccessToken": ["expires-soon", "no-secret", "not-an-object", "numeric-target", "placeholder"],
                        "Account": ["no-username"], "RefreshToken": ["modified-yesterday"]]
        for (section, keys) in expected {
            XCTAssertEqual(aside[section]?.objectValue?.keys.sorted(), keys, section)
            for key in keys { XCTAssertNil(document[section]?.objectValue?[key], "\(section)/\(key) is not in its section") }
        }
        XCTAssertEqual(aside["AccessToken"]?.objectValue?["not-an-object"], .string("kept as it is"))
        XCTAssertNotNil(document["AccessToken"]?.objectValue?["valid-at"])

        // Imported again (here or into another brokerd), the set-aside entries go back into place: the next
        // export is the same document.
        let again = try Daemon()
        try again.start()
        XCTAssertEqual(try again.ctl(["import", export]).status, 0)
        let second = again.directory.path + "/second.json"
        XCTAssertEqual(try again.ctl(["export", second]).status, 0)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: second)), try Data(contentsOf: URL(fileURLWithPath: export)))
    }
}
