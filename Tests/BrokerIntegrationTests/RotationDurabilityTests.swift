import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// Once the IdP has answered a refresh, the refresh token that was sent is spent: the one in the answer is the only
/// one left. These tests make the emulator refuse a rotated-away token (as an IdP with reuse detection does) and
/// check that the successor survives whatever goes wrong after the answer.
final class RotationDurabilityTests: XCTestCase {
    private let user = "bob@contoso.example"

    private func refresh(_ daemon: Daemon) async throws -> TokenResult {
        try await BrokerConnection(socketPath: daemon.socket).call(.acquireTokenSilently, AcquireTokenSilentlyParams(
            clientId: TestEntra.nonFamily, authority: "https://login.microsoftonline.com/common", scopes: [TestEntra.graph],
            account: AccountReference(user), forceRefresh: true), as: TokenResult.self)
    }

    private func refreshStatuses(_ entra: TestEntra) throws -> [Int] {
        try entra.tokenRequests().filter { $0["grant_type"] as? String == "refresh_token" }.compactMap { $0["status"] as? Int }
    }

    private func signedIn() throws -> (TestEntra, Daemon) {
        let entra = try TestEntra()
        let daemon = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(daemon, user: user, client: TestEntra.nonFamily).status, 0, daemon.log)
        try entra.control("/test/config?old_refresh_token_valid=0")
        return (entra, daemon)
    }

    /// An id_token that fails validation (here: issued ten minutes "in the future", as a local clock that is behind
    /// sees it) drops the id_token only; the access token is answered and the rotated refresh token kept.
    func testAnIdTokenThatFailsTheChecksCostsOnlyTheIdToken() async throws {
        let (entra, daemon) = try signedIn()
        try entra.control("/test/config?id_token_clock_ahead_seconds=600")
        let refreshed = try await refresh(daemon)
        XCTAssertEqual(refreshed.source, "refresh")
        XCTAssertTrue(daemon.log.contains("the id_token was dropped"), daemon.log)

        try entra.control("/test/config?id_token_clock_ahead_seconds=0")
        _ = try await refresh(daemon)  // only the rotated token is valid now
        XCTAssertEqual(try refreshStatuses(entra), [200, 200], "the second refresh used the token of the first answer")
    }

    /// kill -9 as soon as a refresh has been answered, several times: each restart refreshes with the newest token.
    func testKillNineRightAfterEachRefreshNeverLosesTheRotation() async throws {
        let (entra, daemon) = try signedIn()
        let rounds = 5
        for round in 1...rounds {
            let refreshed = try await refresh(daemon)
            XCTAssertEqual(refreshed.source, "refresh", "round \(round)")
            daemon.stop(SIGKILL)
            try daemon.start()
        }
        _ = try await refresh(daemon)
        XCTAssertEqual(try refreshStatuses(entra), Array(repeating: 200, count: rounds + 1), daemon.log)
    }

    /// The state directory is a 2 MiB tmpfs in brokerd's own mount namespace, filled up after the sign-in. The
    /// rotated refresh token's write fails ("database or disk is full"): the caller still gets its token, the
    /// rows stay pending and are retried, and status shows the failure. Once space is freed a retry writes them;
    /// a new brokerd started on a copy of those files then refreshes with the rotated token.
    func testAFullDiskKeepsTheRotationPendingShowsItAndWritesItOnceThereIsSpace() async throws {
        let entra = try TestEntra()
        // Root may mount in a private mount namespace; anyone else gets a user namespace (where brokerd is root).
        let mountState = #"mkdir -p "$0" && mount -t tmpfs -o size=2m,mode=0700 brokerd-state "$0" && exec "$@""#
        let daemon = try Daemon(config: entra.brokerConfig + "\nallow_root = true\n")
        daemon.environment = ["BROWSER": TestIdP.fakeBrowser]
        let unshare = getuid() == 0 ? ["/usr/bin/unshare", "-m"] : ["/usr/bin/unshare", "-rm"]
        try daemon.start(prefix: unshare + ["/bin/sh", "-c", mountState, daemon.stateDir])
        XCTAssertEqual(try entra.signIn(daemon, user: user, client: TestEntra.nonFamily).status, 0, daemon.log)
        try entra.control("/test/config?old_refresh_token_valid=0")

        let stateInside = "/proc/\(daemon.pid)/root" + daemon.stateDir  // the tmpfs, seen from outside its namespace
        let filler = stateInside + "/filler"
        let dd = try runCommand("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=64k"])
        XCTAssertTrue(dd.stderr.contains("No space left"), "the tmpfs filled up: \(dd.stderr)")

        let refreshed = try await refresh(daemon)
        XCTAssertEqual(refreshed.source, "refresh", "the caller gets its token although it could not be written")
        let failing = try await BrokerConnection(socketPath: daemon.socket).call(.getStatus, as: StatusResult.self)
        XCTAssertNotNil(failing.lastWriteError, "status shows the failed write")
        XCTAssertTrue(try daemon.ctl(["status"]).stdout.contains("WRITE ERROR"))

        try FileManager.default.removeItem(atPath: filler)
        try await assertWrittenAndRefreshable(daemon, entra)
    }

    /// Waits until a retry has written what was pending (status shows no write error), then copies the quiescent
    /// files (database, write-ahead log, key) out of brokerd's namespace, kills it, and refreshes through a new
    /// brokerd on the copy: only the rotated refresh token works there.
    private func assertWrittenAndRefreshable(_ daemon: Daemon, _ entra: TestEntra) async throws {
        var recovered = false
        for _ in 0..<600 where !recovered {  // the retries back off up to 30 s between attempts
            let status = try await BrokerConnection(socketPath: daemon.socket).call(.getStatus, as: StatusResult.self)
            recovered = status.lastWriteError == nil
            if !recovered { usleep(100_000) }
        }
        XCTAssertTrue(recovered, "a retry wrote the pending rows once it could: \(daemon.log)")

        let stateInside = "/proc/\(daemon.pid)/root" + daemon.stateDir
        let copy = try Daemon(config: entra.brokerConfig)
        try FileManager.default.createDirectory(atPath: copy.stateDir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        for name in try FileManager.default.contentsOfDirectory(atPath: stateInside) {
            try FileManager.default.copyItem(atPath: stateInside + "/" + name, toPath: copy.stateDir + "/" + name)
        }
        daemon.stop(SIGKILL)
        try copy.start()
        _ = try await refresh(copy)
        XCTAssertEqual(try refreshStatuses(entra), [200, 200], "the copy refreshed with the rotated token: \(copy.log)")
    }

    /// brokerd starts on a state directory that cannot be written (a read-only mount, here a tmpfs holding a copy of
    /// a signed-in cache, remounted read-only before brokerd starts). It serves the cache, status says why writes
    /// will fail, a refresh answers with its rotated token kept in memory; once the directory is writable again the
    /// next attempt writes it, and a new brokerd on those files refreshes with the rotated token.
    func testAReadOnlyStateDirectoryIsServedAndTheRotationWrittenOnceItIsWritable() async throws {
        let entra = try TestEntra()
        let first = try entra.startBroker()
        XCTAssertEqual(try entra.signIn(first, user: user, client: TestEntra.nonFamily).status, 0, first.log)
        XCTAssertEqual(first.stop(), 0)  // a clean stop checkpoints: cache.db alone is the cache

        let readOnly = #"mkdir -p "$0" && mount -t tmpfs -o size=2m,mode=0700 brokerd-state "$0" && cp -a "$1"/. "$0"/ && mount -o remount,ro "$0" && shift && exec "$@""#
        let daemon = try Daemon(config: entra.brokerConfig + "\nallow_root = true\n")
        let unshare = getuid() == 0 ? ["/usr/bin/unshare", "-m"] : ["/usr/bin/unshare", "-rm"]
        try daemon.start(prefix: unshare + ["/bin/sh", "-c", readOnly, daemon.stateDir, first.stateDir])
        let status = try await BrokerConnection(socketPath: daemon.socket).call(.getStatus, as: StatusResult.self)
        XCTAssertEqual(status.accounts, 1, daemon.log)
        XCTAssertTrue(status.lastWriteError?.contains("opened read-only") == true, "\(String(describing: status.lastWriteError))")

        try entra.control("/test/config?old_refresh_token_valid=0")
        let refreshed = try await refresh(daemon)
        XCTAssertEqual(refreshed.source, "refresh")
        XCTAssertTrue(try daemon.ctl(["status"]).stdout.contains("WRITE ERROR"))

        let enter = getuid() == 0 ? ["-m"] : ["-U", "-m", "--preserve-credentials"]
        let remount = try runCommand("/usr/bin/nsenter", ["-t", "\(daemon.pid)"] + enter + ["mount", "-o", "remount,rw", daemon.stateDir])
        XCTAssertEqual(remount.status, 0, remount.stderr)
        try await assertWrittenAndRefreshable(daemon, entra)
    }
}
