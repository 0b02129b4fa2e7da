import Foundation
import XCTest

/// The cache key's stores with a real Secret Service: gnome-keyring on a private `dbus-daemon --session`, checked
/// with secret-tool (libsecret, a real client). Keys are compared by hash or in memory, never printed.
final class KeyStoreTests: XCTestCase {
    private var bus: PrivateSessionBus!

    override func setUpWithError() throws {
        bus = try PrivateSessionBus()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/secret-tool") else {
            throw missing("secret-tool is not installed (apt-get install libsecret-tools)")
        }
    }

    override func tearDown() {
        bus = nil
    }

    private func daemon(_ config: String = "", directory: TemporaryDirectory? = nil) throws -> Daemon {
        let daemon = try Daemon(config: "background_refresh = false\n" + config, directory: directory ?? TemporaryDirectory())
        daemon.environment = bus.environment
        return daemon
    }

    private func setKeyStore(_ daemon: Daemon, _ setting: String) throws {
        try "background_refresh = false\nkey_store = \"\(setting)\"\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
    }

    private func importFixture(_ daemon: Daemon) throws {
        let file = daemon.directory.path + "/fixture.json"
        try CacheFixture.twoAppsTwoAccounts.json.write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try daemon.ctl(["import", file])
        XCTAssertEqual(imported.status, 0, imported.stderr)
    }

    /// The cached access token of Alice's app A, served from the cache (no identity provider is running).
    private func assertCachedTokenServed(_ daemon: Daemon, file: StaticString = #filePath, line: UInt = #line) throws {
        let answer = try RawClient(daemon.socket).request("acquireTokenSilently", [
            "clientId": "client-a", "scopes": ["User.Read"], "account": CacheFixture.alice,
            "authority": "https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001",
        ])
        let result = answer["result"] as? [String: Any]
        XCTAssertEqual(result?["accessToken"] as? String, "fake-at-alice-a", "\(answer)", file: file, line: line)
        XCTAssertEqual(result?["source"] as? String, "cache", file: file, line: line)
    }

    private func status(_ daemon: Daemon) throws -> [String: Any] {
        let answer = try RawClient(daemon.socket).request("getStatus")
        return try XCTUnwrap(answer["result"] as? [String: Any], "\(answer)")
    }

    private func keyStore(_ daemon: Daemon) throws -> [String: Any] {
        try XCTUnwrap(try status(daemon)["keyStore"] as? [String: Any])
    }

    private var keyFile: (Daemon) -> String { { $0.stateDir + "/cache.key" } }

    /// The state directory as brokerd names it in the item's attributes.
    private func attributes(_ daemon: Daemon) -> [String] {
        ["application", "brokerd", "state-directory", URL(fileURLWithPath: daemon.stateDir).resolvingSymlinksInPath().path]
    }

    /// sha256 and size of the secret gnome-keyring holds for this state directory, as secret-tool reads it
    /// (nil: none). Only the hash leaves the shell.
    private func keyringKeyHash(_ daemon: Daemon) throws -> String? {
        let result = try runCommand("/bin/sh", ["-c", #"secret-tool lookup "$@" > "$0/secret" && sha256sum < "$0/secret" | cut -c1-64 && wc -c < "$0/secret"; s=$?; rm -f "$0/secret"; exit $s"#,
                                                daemon.directory.path] + attributes(daemon), environment: bus.environment)
        guard result.status == 0 else { return nil }
        let lines = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2, result.stderr)
        XCTAssertEqual(lines.last, "32", "the keyring's secret is a 256-bit key")
        return lines.first
    }

    private func fileHash(_ path: String) throws -> String? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let result = try runCommand("/bin/sh", ["-c", #"sha256sum < "$0" | cut -c1-64"#, path])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Whether secret-tool finds brokerd's item for this state directory (locked or not), by its attributes.
    private func keyringHoldsItem(_ daemon: Daemon) throws -> Bool {
        let result = try runCommand("/usr/bin/secret-tool", ["search", "--all"] + attributes(daemon), environment: bus.environment)
        return (result.stdout + result.stderr).contains("label = brokerd cache key")
    }

    // MARK: Choice

    func testAutoPicksTheSecretServiceAndTokensSurviveARestart() throws {
        try bus.startSecretService()
        let daemon = try daemon()
        try daemon.start()
        try importFixture(daemon)

        let store = try keyStore(daemon)
        XCTAssertEqual(store["kind"] as? String, "secret-service")
        XCTAssertEqual(store["location"] as? String, "gnome-keyring-daemon on the session bus")
        XCTAssertEqual(store["reason"] as? String, "chosen automatically: a Secret Service is on the session bus")
        XCTAssertNil(store["path"])
        let shown = try daemon.ctl(["status"])
        XCTAssertTrue(shown.stdout.contains("secret-service (gnome-keyring-daemon on the session bus)\n"), shown.stdout)
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyFile(daemon)), "no key file on disk")
        XCTAssertTrue(try keyringHoldsItem(daemon))
        let hash = try XCTUnwrap(try keyringKeyHash(daemon), "the key is in the keyring")

        XCTAssertEqual(daemon.stop(), 0)
        try daemon.start()
        XCTAssertEqual(try keyStore(daemon)["kind"] as? String, "secret-service")
        try assertCachedTokenServed(daemon)
        XCTAssertEqual(try keyringKeyHash(daemon), hash, "the same key after the restart")
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyFile(daemon)))
    }

    func testAutoWithoutASessionBusUsesTheFileAndSaysWhy() throws {
        let daemon = try Daemon(config: "background_refresh = false\n")  // Daemon points brokerd at no bus
        try daemon.start()
        let store = try keyStore(daemon)
        XCTAssertEqual(store["kind"] as? String, "file")
        XCTAssertEqual(store["path"] as? String, keyFile(daemon))
        let reason = try XCTUnwrap(store["reason"] as? String)
        XCTAssertTrue(reason.hasPrefix("no Secret Service on the session bus (cannot connect to the session bus: "), reason)
        let shown = try daemon.ctl(["status"])
        XCTAssertTrue(shown.stdout.contains("file (\(keyFile(daemon))): no Secret Service on the session bus ("), shown.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: keyFile(daemon)))
    }

    func testExplicitSecretServiceWithoutABusIsAnErrorAtStart() throws {
        let daemon = try Daemon(config: "key_store = \"secret-service\"\n")
        let process = try daemon.launch()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 75, "EX_TEMPFAIL: the Secret Service cannot be used")
        XCTAssertTrue(daemon.log.contains("brokerd: key store: key_store = \"secret-service\", but no Secret Service is reachable "
            + "on the session bus (cannot connect to the session bus: "), daemon.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyFile(daemon)), "no silent fallback to a key file")
    }

    /// A bus where org.freedesktop.secrets is only activatable: gnome-keyring starts on first use with no login
    /// keyring, so there is no default collection to keep the key in.
    func testNoDefaultCollection() throws {
        let auto = try daemon()
        try auto.start()
        let store = try keyStore(auto)
        XCTAssertEqual(store["kind"] as? String, "file")
        XCTAssertEqual(store["reason"] as? String,
                       "the Secret Service on the session bus (gnome-keyring-daemon) cannot take the key: it has no default collection")
        XCTAssertTrue(auto.log.contains("key store: file, because the Secret Service on the session bus"), auto.log)
        XCTAssertTrue(FileManager.default.fileExists(atPath: keyFile(auto)))

        let explicit = try daemon("key_store = \"secret-service\"\n")
        let process = try explicit.launch()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 75, "EX_TEMPFAIL: the Secret Service cannot be used")
        XCTAssertTrue(explicit.log.contains("has no default collection to keep the key in; create one (for example with "
            + "seahorse) or set key_store = \"file\""), explicit.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyFile(explicit)))
    }

    // MARK: Moving between stores

    func testMovingFromFileToSecretServiceAndBackKeepsTheCache() throws {
        try bus.startSecretService()
        let daemon = try daemon("key_store = \"file\"\n")
        try daemon.start()
        try importFixture(daemon)
        XCTAssertEqual(try keyStore(daemon)["reason"] as? String, "key_store = \"file\" in the config")
        let key = try XCTUnwrap(FileManager.default.contents(atPath: keyFile(daemon)))
        let hash = try XCTUnwrap(try fileHash(keyFile(daemon)))
        XCTAssertFalse(try keyringHoldsItem(daemon))
        XCTAssertEqual(daemon.stop(), 0)

        try setKeyStore(daemon, "auto")
        try daemon.start()
        XCTAssertEqual(try keyStore(daemon)["kind"] as? String, "secret-service")
        try assertCachedTokenServed(daemon)
        XCTAssertEqual(try keyringKeyHash(daemon), hash, "the file's key moved into the keyring")
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyFile(daemon)), "the key file was removed after the move")
        XCTAssertTrue(daemon.log.contains("the cache key moved from \(keyFile(daemon)) to gnome-keyring-daemon on the session bus"),
                      daemon.log)
        assertKeyNotLogged(key, daemon)
        XCTAssertEqual(daemon.stop(), 0)

        try setKeyStore(daemon, "file")
        try daemon.start()
        XCTAssertEqual(try keyStore(daemon)["kind"] as? String, "file")
        try assertCachedTokenServed(daemon)
        XCTAssertEqual(try fileHash(keyFile(daemon)), hash, "the keyring's key moved back into the file")
        XCTAssertFalse(try keyringHoldsItem(daemon), "the keyring's item was deleted after the move")
        assertKeyNotLogged(key, daemon)
    }

    /// kill -9 after the key was stored in the keyring but before the key file was removed: both hold the same key.
    /// The next start finishes the move. Then a key file of another key (one that does not open the cache) is set
    /// aside, not used and not deleted.
    func testInterruptedMoveAndTwoDifferentKeys() throws {
        try bus.startSecretService()
        let daemon = try daemon()
        try daemon.start()
        try importFixture(daemon)
        XCTAssertEqual(daemon.stop(SIGKILL), 128 + SIGKILL)
        let hash = try XCTUnwrap(try keyringKeyHash(daemon))

        // The copy an interrupted move leaves: the keyring's key, written back to the key file by secret-tool.
        let copy = try runCommand("/bin/sh", ["-c", #"umask 077 && secret-tool lookup "$@" > "$0""#, keyFile(daemon)] + attributes(daemon),
                                  environment: bus.environment)
        XCTAssertEqual(copy.status, 0, copy.stderr)
        XCTAssertEqual(try fileHash(keyFile(daemon)), hash)
        try daemon.start()
        try assertCachedTokenServed(daemon)
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyFile(daemon)))
        XCTAssertTrue(daemon.log.contains("the copy left in \(keyFile(daemon)) by an interrupted move was removed"), daemon.log)
        XCTAssertEqual(daemon.stop(SIGKILL), 128 + SIGKILL)

        let other = (0..<32).map { _ in UInt8.random(in: 0...255) }
        XCTAssertTrue(FileManager.default.createFile(atPath: keyFile(daemon), contents: Data(other), attributes: [.posixPermissions: 0o600]))
        try daemon.start()
        try assertCachedTokenServed(daemon)
        XCTAssertEqual(try keyringKeyHash(daemon), hash, "the key that opens the cache stays")
        let aside = try FileManager.default.contentsOfDirectory(atPath: daemon.stateDir).filter { $0.hasPrefix("cache.key.superseded-") }
        XCTAssertEqual(aside.count, 1, "the other key is kept aside")
        XCTAssertTrue(FileManager.default.contents(atPath: daemon.stateDir + "/" + (aside.first ?? "")) == Data(other))
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyFile(daemon)))
    }

    /// Moving back to the file: a key file of another key (that does not open the cache) is set aside and the
    /// keyring's key takes its place; then kill -9 after the key file was written but before the keyring's item was
    /// deleted (both hold the same key): the next start deletes the item.
    func testMovingBackToTheFileWithAStrayKeyFileAndAnInterruptedMove() throws {
        try bus.startSecretService()
        let daemon = try daemon()
        try daemon.start()
        try importFixture(daemon)
        XCTAssertEqual(daemon.stop(), 0)
        let hash = try XCTUnwrap(try keyringKeyHash(daemon))

        let stray = (0..<32).map { _ in UInt8.random(in: 0...255) }
        XCTAssertTrue(FileManager.default.createFile(atPath: keyFile(daemon), contents: Data(stray), attributes: [.posixPermissions: 0o600]))
        try setKeyStore(daemon, "file")
        try daemon.start()
        try assertCachedTokenServed(daemon)
        XCTAssertEqual(try fileHash(keyFile(daemon)), hash, "the keyring's key, the one that opens the cache, is in the file")
        XCTAssertFalse(try keyringHoldsItem(daemon))
        let aside = try FileManager.default.contentsOfDirectory(atPath: daemon.stateDir).filter { $0.hasPrefix("cache.key.superseded-") }
        XCTAssertEqual(aside.count, 1, "the stray key is kept aside")
        XCTAssertTrue(daemon.log.contains("only the latter opens the cache, so it moved to \(keyFile(daemon))"), daemon.log)
        XCTAssertEqual(daemon.stop(SIGKILL), 128 + SIGKILL)

        // The state a crash leaves between writing the key file and deleting the item: the item, stored again.
        try setKeyStore(daemon, "secret-service")
        try daemon.start()
        XCTAssertEqual(try keyringKeyHash(daemon), hash)
        XCTAssertEqual(daemon.stop(SIGKILL), 128 + SIGKILL)
        let copy = try runCommand("/bin/sh", ["-c", #"umask 077 && secret-tool lookup "$@" > "$0""#, keyFile(daemon)] + attributes(daemon),
                                  environment: bus.environment)
        XCTAssertEqual(copy.status, 0, copy.stderr)
        try setKeyStore(daemon, "file")
        try daemon.start()
        try assertCachedTokenServed(daemon)
        XCTAssertEqual(try fileHash(keyFile(daemon)), hash)
        XCTAssertFalse(try keyringHoldsItem(daemon), "the copy in the keyring was deleted")
        XCTAssertTrue(daemon.log.contains("by an interrupted move was deleted"), daemon.log)
    }

    // MARK: Locked

    /// The keyring's collection is locked and nobody can answer the unlock prompt (no display here): start fails
    /// with the reason, and nothing is lost or replaced — no new key, the cache and the keyring's item stay.
    func testLockedCollectionFailsStartAndLosesNothing() throws {
        try bus.startSecretService()
        let daemon = try daemon()
        try daemon.start()
        try importFixture(daemon)
        XCTAssertEqual(daemon.stop(), 0)
        let lock = try bus.busctl(["call", "org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.Secret.Service",
                                   "Lock", "ao", "1", "/org/freedesktop/secrets/collection/login"])
        XCTAssertEqual(lock.status, 0, lock.stderr)

        let process = try daemon.launch()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 75, "EX_TEMPFAIL: the Secret Service cannot be used")
        XCTAssertTrue(daemon.log.contains("is locked and was not unlocked ("), daemon.log)
        XCTAssertTrue(daemon.log.contains("); unlock it in gnome-keyring-daemon and start brokerd again, or set key_store = \"file\""),
                      daemon.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: keyFile(daemon)), "no new key")
        XCTAssertTrue(FileManager.default.fileExists(atPath: daemon.stateDir + "/cache.db"), "the cache stays")
        XCTAssertTrue(try keyringHoldsItem(daemon), "the keyring's item stays")
    }

    private func assertKeyNotLogged(_ key: Data, _ daemon: Daemon, file: StaticString = #filePath, line: UInt = #line) {
        let hex = key.map { String(format: "%02x", $0) }.joined()
        let forms = [hex, hex.uppercased(), key.base64EncodedString()]
        XCTAssertFalse(forms.contains { daemon.log.contains($0) }, "the key is in brokerd's log", file: file, line: line)
    }
}
