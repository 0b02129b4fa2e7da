import BrokerProtocol
import Foundation
import XCTest

/// `brokerctl backup` and `restore`: the whole cache sealed under a passphrase, merged back into this brokerd or
/// another one. The standard scrypt cost is used (seconds per derivation in a debug build: three here).
final class BackupRestoreTests: XCTestCase {
    private func status(_ daemon: Daemon) throws -> StatusResult {
        try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
    }

    func testABackupHoldsNoSecretInTheClearAndRestoresIntoAnotherBrokerd() throws {
        let daemon = try Daemon(config: "background_refresh = false\nkey_store = \"file\"\n")
        try daemon.start()
        let imported = try daemon.ctl(["import", "-"], stdin: CacheFixture.twoAppsTwoAccounts.json)
        XCTAssertEqual(imported.status, 0, imported.stderr)
        let passphrase = daemon.directory.path + "/passphrase", wrong = daemon.directory.path + "/wrong"
        try "correct horse battery\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        try "correct horse battery staple\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        let short = daemon.directory.path + "/short"
        try "horse\n".write(toFile: short, atomically: true, encoding: .utf8)
        let file = daemon.directory.path + "/cache.backup"

        let refused = try daemon.ctl(["backup", file, "--passphrase-file", short])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("at least 8 characters"), refused.stderr)
        let backup = try daemon.ctl(["backup", file, "--passphrase-file", passphrase])
        XCTAssertEqual(backup.status, 0, backup.stderr)
        XCTAssertTrue(backup.stdout.contains("Backed up 2 account(s)"), backup.stdout)
        let sealed = try Data(contentsOf: URL(fileURLWithPath: file))
        XCTAssertNil(sealed.range(of: Data("fake-rt-alice-a".utf8)), "no refresh token in the clear")
        XCTAssertNil(sealed.range(of: Data("Alice@Contoso.example".utf8)), "nothing of the cache in the clear")
        var info = stat()
        XCTAssertEqual(stat(file, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        XCTAssertFalse(daemon.log.contains("correct horse"), "the passphrase is never logged")
        XCTAssertEqual(daemon.stop(), 0)

        // Another machine's brokerd, empty: the wrong passphrase changes nothing, the right one brings everything.
        let other = try Daemon(config: "background_refresh = false\nkey_store = \"file\"\n")
        try other.start()
        let denied = try other.ctl(["restore", file, "--passphrase-file", wrong])
        XCTAssertNotEqual(denied.status, 0)
        XCTAssertTrue(denied.stderr.contains("the passphrase does not open the backup"), denied.stderr)
        XCTAssertEqual(try status(other).accounts, 0)
        let restored = try other.ctl(["restore", file, "--passphrase-file", passphrase])
        XCTAssertEqual(restored.status, 0, restored.stderr)
        XCTAssertTrue(restored.stdout.hasPrefix("Restored \(file): "), restored.stdout)
        XCTAssertEqual(try status(other).accounts, 2)
        let answer = try RawClient(other.socket).request("acquireTokenSilently", [
            "clientId": "client-a", "scopes": ["User.Read"], "account": CacheFixture.alice,
            "authority": "https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001",
        ])
        XCTAssertEqual((answer["result"] as? [String: Any])?["accessToken"] as? String, "fake-at-alice-a", "\(answer)")
        let notABackup = try other.ctl(["restore", other.stateDir + "/cache.key", "--passphrase-file", passphrase])
        XCTAssertNotEqual(notABackup.status, 0)
        XCTAssertFalse(other.log.contains("correct horse"), "the passphrase is never logged")
        XCTAssertEqual(other.stop(), 0)
    }
}
