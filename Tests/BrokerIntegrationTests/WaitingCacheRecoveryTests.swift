import BrokerProtocol
import Foundation
import XCTest

/// A key store that loses the cache's key never costs the sign-ins: the old database waits, untouched, while a new
/// one serves, and it is merged back when its key is at hand again. A real brokerd, brokerctl, and gnome-keyring on
/// a private bus; keys are compared by their bytes in memory, never printed.
final class WaitingCacheRecoveryTests: XCTestCase {
    private static let carol = "00000000-0000-0000-0000-0000000ca201.72f988bf-0000-0000-0000-000000000001"

    /// Carol signed in to app A: a cache of its own, made while the old one waits.
    private static var carolsCache: CacheFixture {
        CacheFixture(grants: [.init(homeAccountId: carol, username: "carol@contoso.example", clientId: "client-a",
                                    scopes: "User.Read", secretTag: "carol-a")])
    }

    private func status(_ daemon: Daemon) throws -> StatusResult {
        let shown = try daemon.ctl(["status", "--json"])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        return try decode(StatusResult.self, shown.stdout)
    }

    private func importCache(_ daemon: Daemon, _ fixture: CacheFixture) throws {
        let file = daemon.directory.path + "/import.json"
        try fixture.json.write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try daemon.ctl(["import", file])
        XCTAssertEqual(imported.status, 0, imported.stderr + daemon.log)
    }

    /// The cached access token of `account`'s app A, as an app asks for it.
    private func cachedToken(_ daemon: Daemon, _ account: String) throws -> String? {
        let answer = try RawClient(daemon.socket).request("acquireTokenSilently", [
            "clientId": "client-a", "scopes": ["User.Read"], "account": account,
            "authority": "https://login.microsoftonline.com/72f988bf-0000-0000-0000-000000000001",
        ])
        return (answer["result"] as? [String: Any])?["accessToken"] as? String
    }

    private func databases(_ daemon: Daemon) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: daemon.stateDir)
            .filter { $0.hasPrefix("cache") && $0.contains(".db") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }.sorted()
    }

    /// Alice and Bob's cache under the key in `keyStore`; then the key is lost (by `lose`) and brokerd starts again:
    /// their database waits, untouched, and a new one serves Carol.
    private func lostKeyAndANewSignIn(_ daemon: Daemon, lose: () throws -> Void) throws {
        try daemon.start()
        try importCache(daemon, .twoAppsTwoAccounts)
        XCTAssertEqual(daemon.stop(), 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: daemon.stateDir + "/cache.db"))
        try lose()

        try daemon.start()
        let waiting = try status(daemon)
        XCTAssertEqual(waiting.accounts, 0)
        XCTAssertEqual(waiting.waitingCaches, [daemon.stateDir + "/cache.db"])
        XCTAssertTrue(waiting.problems.contains { $0.contains("waiting for its key") }, "\(waiting.problems)")
        XCTAssertTrue(daemon.log.contains("waiting for its key"), daemon.log)
        let shown = try daemon.ctl(["status"]).stdout
        XCTAssertTrue(shown.split(separator: "\n").contains { $0.hasPrefix("cache waiting ")
            && $0.hasSuffix(" \(daemon.stateDir)/cache.db (for its key: brokerctl recover)") }, shown)
        let doctor = try daemon.ctl(["doctor"])
        XCTAssertTrue(doctor.stdout.contains("waiting for its key"), doctor.stdout)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: daemon.stateDir + "/cache.db")), before, "kept as it was")
        try importCache(daemon, Self.carolsCache)
    }

    /// Everyone served now, and again after a restart (the merge is durable and opens with the store's key).
    private func assertEveryoneServedNowAndAfterARestart(_ daemon: Daemon, file: StaticString = #filePath,
                                                         line: UInt = #line) throws {
        try assertEveryoneServed(daemon, file: file, line: line)
        XCTAssertEqual(daemon.stop(), 0, file: file, line: line)
        try daemon.start()
        try assertEveryoneServed(daemon, file: file, line: line)
        XCTAssertEqual(daemon.stop(), 0, file: file, line: line)
    }

    /// A brokerd on the file key store whose key file was moved to `saved.key`, with Carol signed in meanwhile.
    private func lostKeyFile() throws -> (Daemon, saved: String) {
        let daemon = try Daemon(config: "background_refresh = false\nkey_store = \"file\"\n")
        let saved = daemon.directory.path + "/saved.key"
        try lostKeyAndANewSignIn(daemon) {
            try FileManager.default.moveItem(atPath: daemon.stateDir + "/cache.key", toPath: saved)
        }
        return (daemon, saved)
    }

    private func assertEveryoneServed(_ daemon: Daemon, file: StaticString = #filePath, line: UInt = #line) throws {
        let shown = try status(daemon)
        XCTAssertEqual(shown.accounts, 3, "Alice, Bob and Carol", file: file, line: line)
        XCTAssertEqual(shown.waitingCaches, [], file: file, line: line)
        XCTAssertFalse(shown.problems.contains { $0.contains("waiting") }, "\(shown.problems)", file: file, line: line)
        XCTAssertEqual(try cachedToken(daemon, CacheFixture.alice), "fake-at-alice-a", file: file, line: line)
        XCTAssertEqual(try cachedToken(daemon, Self.carol), "fake-at-carol-a", file: file, line: line)
    }

    /// A desktop notification server on the bus (Tests/dbus/notification_server.py), which logs each notification.
    private func startNotificationServer(_ bus: PrivateSessionBus) throws -> String {
        let log = bus.directory.path + "/notifications.log"
        notificationServers.append(try ChildProcess("/usr/bin/python3", [TestIdP.root + "/Tests/dbus/notification_server.py", log],
                                                    environment: bus.environment, logPath: log + ".stderr"))
        try waitFor("the notification server") { try bus.busctl(["list", "--acquired"]).stdout.contains("org.freedesktop.Notifications") }
        return log
    }

    private var notificationServers: [ChildProcess] = []

    override func tearDown() {
        for server in notificationServers where server.isRunning {
            kill(server.processIdentifier, SIGTERM)
            server.waitUntilExit()
        }
        notificationServers = []
    }

    /// The lines the notification server logged, one per notification.
    private static func notifications(_ log: String) -> [String] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The user's login keyring is replaced by an empty one (or another provider takes org.freedesktop.secrets), and
    /// later the old one comes back while brokerd runs: brokerd sees it take the Secret Service's name, merges the old
    /// database, and the merged cache ends under the key the keyring holds, so that the next start opens it.
    func testAKeyringReplacedByAnEmptyOneThenTheOldOneBackLosesNoSignIn() throws {
        let bus = try PrivateSessionBus()
        try bus.startSecretService()
        let daemon = try Daemon(config: "background_refresh = false\n")
        daemon.environment = bus.environment
        let keyrings = bus.keyringsDirectory
        let notificationLog = try startNotificationServer(bus)
        try lostKeyAndANewSignIn(daemon) {
            try bus.stopSecretService()
            try FileManager.default.moveItem(atPath: keyrings, toPath: keyrings + "-old")
            try bus.startSecretService()  // a keyring of its own, without brokerd's key
        }
        XCTAssertEqual(try status(daemon).keyStore.kind, "secret-service")
        try waitFor("the desktop notification") { Self.notifications(notificationLog).count == 1 }
        XCTAssertTrue(Self.notifications(notificationLog).first?.contains("waiting for their key") == true)

        try bus.stopSecretService()
        try FileManager.default.moveItem(atPath: keyrings, toPath: keyrings + "-replacement")
        try FileManager.default.moveItem(atPath: keyrings + "-old", toPath: keyrings)
        try bus.startSecretService()
        // Nothing but the keyring's return tells brokerd (org.freedesktop.secrets has a new owner).
        try waitFor("the waiting cache merged") { try status(daemon).waitingCaches == [] }
        try assertEveryoneServed(daemon)
        XCTAssertEqual(try status(daemon).cachePath, daemon.stateDir + "/cache.db", "the database the keyring's key opens")
        XCTAssertEqual(try databases(daemon), ["cache.db"], "the database used meanwhile was retired")
        XCTAssertTrue(daemon.log.contains("a cache that waited for its key was merged"), daemon.log)
        try assertEveryoneServedNowAndAfterARestart(daemon)
    }

    /// The user switches key store while the keyring is gone (key_store = "file": a new key file, the keyring's cache
    /// waits), then back to the keyring: the keyring's key opens its cache again, the key file's is set aside as
    /// `cache.key.superseded-…`, and brokerd merges the cache made meanwhile with that key at start, unasked.
    func testAKeyStoreSwitchedToTheFileAndBackLosesNoSignIn() throws {
        let bus = try PrivateSessionBus { PrivateSessionBus.sessionConfiguration(socketPath: $0) }  // nothing activatable
        try bus.startSecretService()
        let daemon = try Daemon(config: "background_refresh = false\n")
        daemon.environment = bus.environment
        let useTheFile = { try "background_refresh = false\nkey_store = \"file\"\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8) }
        try lostKeyAndANewSignIn(daemon) {
            try bus.stopSecretService()
            try useTheFile()
        }
        XCTAssertEqual(try status(daemon).keyStore.kind, "file")
        XCTAssertEqual(daemon.stop(), 0)

        try bus.startSecretService()
        try "background_refresh = false\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try daemon.start()
        try waitFor("the cache made meanwhile merged") { try status(daemon).waitingCaches == [] }
        XCTAssertEqual(try status(daemon).keyStore.kind, "secret-service")
        XCTAssertEqual(try databases(daemon), ["cache.db"])
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: daemon.stateDir).contains { $0.hasPrefix("cache.key.superseded-") })
        try assertEveryoneServedNowAndAfterARestart(daemon)
    }

    /// The key file is deleted; `brokerctl recover --key-file` with a saved copy brings the old sign-ins back.
    func testAMissingKeyFileThenRecoverWithAKeyTheUserHolds() throws {
        let (daemon, saved) = try lostKeyFile()
        let nothing = try daemon.ctl(["recover"])
        XCTAssertNotEqual(nothing.status, 0, "still waiting: " + nothing.stdout)
        XCTAssertTrue(nothing.stdout.contains("Still waiting for their keys: \(daemon.stateDir)/cache.db"), nothing.stdout)
        let wrongSize = daemon.directory.path + "/short.key"
        try Data(repeating: 1, count: 16).write(to: URL(fileURLWithPath: wrongSize))
        XCTAssertNotEqual(try daemon.ctl(["recover", "--key-file", wrongSize]).status, 0)

        let recovered = try daemon.ctl(["recover", "--key-file", saved])
        XCTAssertEqual(recovered.status, 0, recovered.stdout + recovered.stderr)
        XCTAssertTrue(recovered.stdout.contains("Merged \(daemon.stateDir)/cache.db: "), recovered.stdout)
        XCTAssertFalse(try databases(daemon).contains("cache.db"), "retired once merged")
        try assertEveryoneServedNowAndAfterARestart(daemon)
    }

    /// `brokerctl reset` asks first, then gives the waiting database up as a file `recover --database` can still open.
    func testResetGivesUpOnlyWhenConfirmedAndKeepsABackup() throws {
        let (daemon, saved) = try lostKeyFile()
        let unconfirmed = try daemon.ctl(["reset"])
        XCTAssertNotEqual(unconfirmed.status, 0)
        XCTAssertTrue(unconfirmed.stderr.contains("confirm with --yes"), unconfirmed.stderr)
        XCTAssertEqual(try status(daemon).waitingCaches, [daemon.stateDir + "/cache.db"], "nothing given up")

        let reset = try daemon.ctl(["reset", "--yes", "--json"])
        XCTAssertEqual(reset.status, 0, reset.stderr)
        let kept = try decode(ResetWaitingCachesResult.self, reset.stdout).keptAs
        XCTAssertEqual(kept.count, 1)
        XCTAssertTrue(kept.first?.hasPrefix(daemon.stateDir + "/cache.db.given-up-") == true, "\(kept)")
        XCTAssertEqual(try status(daemon).waitingCaches, [])
        XCTAssertEqual(daemon.stop(), 0)
        try daemon.start()
        XCTAssertEqual(try status(daemon).waitingCaches, [], "a database given up is not waited for again")
        XCTAssertEqual(try status(daemon).accounts, 1)

        let recovered = try daemon.ctl(["recover", "--database", kept[0], "--key-file", saved])
        XCTAssertEqual(recovered.status, 0, recovered.stdout + recovered.stderr)
        try assertEveryoneServed(daemon)
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// kill -9 at many points of a merge of a large waiting cache: after each, brokerd starts, and a recover brings
    /// everything of both caches together.
    func testKillNineDuringAMergeLosesNeitherCache() throws {
        let daemon = try Daemon(config: "background_refresh = false\nkey_store = \"file\"\n")
        let saved = daemon.directory.path + "/saved.key"
        let many = CacheFixture(grants: (0..<1500).map { index in
            let id = String(format: "00000000-0000-0000-0000-%012d.72f988bf-0000-0000-0000-000000000001", index)
            return .init(homeAccountId: id, username: "user\(index)@contoso.example", clientId: "client-a",
                         scopes: "User.Read", secretTag: "user-\(index)")
        })
        try daemon.start()
        try importCache(daemon, many)
        XCTAssertEqual(daemon.stop(), 0)
        try FileManager.default.moveItem(atPath: daemon.stateDir + "/cache.key", toPath: saved)
        try daemon.start()
        try importCache(daemon, Self.carolsCache)

        // The first round kills brokerd while it reads the waiting database (its file is open in brokerd); the next
        // ones once that read is over, a little later each time, into the import and the removal, until a round
        // finds the merge done.
        let waitingFile = daemon.stateDir + "/cache.db"
        var killedMidMerge = 0
        for (round, delay) in [0, 0, 5_000, 20_000, 80_000, 300_000].enumerated() {
            let merging = try RunningCommand(Binaries.brokerctl, ["recover", "--key-file", saved, "--socket", daemon.socket])
            Self.wait("brokerd to read the waiting database", until: Self.holdsOpen(daemon.pid, waitingFile))
            if round > 0 { Self.wait("the read to end", until: !Self.holdsOpen(daemon.pid, waitingFile)) }
            usleep(useconds_t(delay))
            daemon.stop(SIGKILL)
            _ = merging.finish()
            try daemon.start()
            let shown = try status(daemon)
            let merged = shown.waitingCaches == []
            if merged {
                XCTAssertEqual(shown.accounts, 1501, "after a kill in round \(round): \(shown.problems)")
                break
            }
            // Both databases are left (WaitingCaches.swift): the waiting one whole, and the one in use with its own
            // account and as much of the merge as was written before the kill (an import is written while it is
            // merged, and a user's key is retired only after the merge is durable). The next recover merges again.
            XCTAssertTrue((1...1501).contains(shown.accounts), "after a kill in round \(round): \(shown.accounts)")
            XCTAssertEqual(try cachedToken(daemon, Self.carol), "fake-at-carol-a", "after a kill in round \(round)")
            killedMidMerge += 1
        }
        XCTAssertGreaterThan(killedMidMerge, 0, "no kill came before the merge was done")
        let finished = try daemon.ctl(["recover", "--key-file", saved])
        XCTAssertEqual(finished.status, 0, finished.stdout + finished.stderr)
        let shown = try status(daemon)
        XCTAssertEqual(shown.accounts, 1501)
        XCTAssertEqual(try cachedToken(daemon, Self.carol), "fake-at-carol-a")
        XCTAssertEqual(try cachedToken(daemon, many.grants[1499].homeAccountId), "fake-at-user-1499")
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// The key file comes back (restored from a backup) while brokerd runs: SIGHUP merges the waiting cache, and the
    /// merged cache moves into the database the restored key opens.
    func testARestoredKeyFileIsFoundOnSIGHUP() throws {
        let (daemon, saved) = try lostKeyFile()
        let keyFile = daemon.stateDir + "/cache.key"
        XCTAssertEqual(unlink(keyFile), 0)
        try FileManager.default.copyItem(atPath: saved, toPath: keyFile)
        kill(daemon.pid, SIGHUP)
        try waitFor("the waiting cache merged") { try status(daemon).waitingCaches == [] }
        XCTAssertEqual(try databases(daemon), ["cache.db"])
        try assertEveryoneServedNowAndAfterARestart(daemon)
    }

    /// Whether process `pid` has `file` open (one of its /proc/PID/fd links points to it).
    private static func holdsOpen(_ pid: Int32, _ file: String) -> Bool {
        let directory = "/proc/\(pid)/fd"
        let links = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return links.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)")) == file }
    }

    /// Polls every half millisecond, for 20 s at most: the moments this test kills brokerd at are that short.
    private static func wait(_ what: String, until condition: @autoclosure () -> Bool) {
        let deadline = Date().addingTimeInterval(20)
        while !condition() {
            guard Date() < deadline else { return XCTFail("timed out waiting for \(what)") }
            usleep(500)
        }
    }
}
