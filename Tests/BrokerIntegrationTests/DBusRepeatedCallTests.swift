import Foundation
import XCTest

/// A broker1 client that keeps one bus connection and asks the same thing again, as Edge and linux-entra-sso do
/// (Tests/dbus/one_connection.py, sd-bus through ctypes). brokerd answers a repeated request from what it gave that
/// caller last (DBusFrontEnd's remembered answer) only while that still holds: after a refresh it gives the new token,
/// after the app is denied it refuses, and every call is on the record.
final class DBusRepeatedCallTests: XCTestCase {
    private var bus: PrivateSessionBus!
    private var entra: TestEntra!
    private var daemon: Daemon!
    private var directory = ""
    static let alice = "a1ce0000-0000-4000-8000-000000000001"

    override func setUpWithError() throws {
        bus = try PrivateSessionBus()
        entra = try TestEntra()
        directory = entra.directory.path
    }

    override func tearDown() {
        daemon = nil
        bus = nil
        entra = nil
    }

    private var silentRequest: String {
        """
        {"authParameters":{"account":{"homeAccountId":"\(Self.alice).\(TestEntra.contoso)","environment":"login.windows.net",\
        "realm":"\(TestEntra.contoso)","username":"alice@contoso.example"},"authority":"https://login.microsoftonline.com/common",\
        "authorizationType":1,"clientId":"\(TestEntra.famA)","decodedClaims":"",\
        "redirectUri":"https://login.microsoftonline.com/common/oauth2/nativeclient","requestedScopes":["\(TestEntra.graph)"],\
        "username":"alice@contoso.example"}}
        """
    }

    private func waitForFile(_ path: String) throws {
        try waitFor("\(path) to appear") { FileManager.default.fileExists(atPath: path) }
    }

    /// brokerd on the private bus with alice signed in to famA; the `call:` step of one_connection.py for her silent
    /// request.
    private func signedInCall() throws -> String {
        daemon = try Daemon(config: entra.brokerConfig)
        daemon.environment = ["BROWSER": TestIdP.fakeBrowser, "IDP_BROWSER_LOG": directory + "/browser.log",
                              "DBUS_SESSION_BUS_ADDRESS": bus.address]
        try daemon.start()
        try bus.waitForBroker()
        let login = try entra.signIn(daemon, user: "alice@contoso.example", client: TestEntra.famA)
        XCTAssertEqual(login.status, 0, login.stderr)
        let request = directory + "/silent.json"
        try silentRequest.write(toFile: request, atomically: true, encoding: .utf8)
        return "call:acquireTokenSilently:\(request)"
    }

    func testTheSameRequestAgainGetsTheAnswerThatHoldsNow() throws {
        let call = try signedInCall()

        // Two calls, then (after a refresh elsewhere) a third, then (after the app is denied) a fourth: one connection.
        let client = try RunningCommand("/usr/bin/python3", [
            TestIdP.root + "/Tests/dbus/one_connection.py", call, call, "mark:\(directory)/two", "wait:\(directory)/refreshed",
            call, "mark:\(directory)/three", "wait:\(directory)/denied", call,
        ], environment: bus.environment)

        try waitForFile(directory + "/two")
        // The client is still on the bus, its two hits counted on the bus thread (HitAudit): a read of the audit has
        // them handed over first, so it sees both, at once.
        let python = try XCTUnwrap(realpath("/usr/bin/python3", nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        })
        XCTAssertEqual(try handedOut(to: "exe:\(python)"), 2, "the audit read while the caller is on the bus")
        let refresh = try daemon.ctl(["token", "--client-id", TestEntra.famA, "--authority", "https://login.microsoftonline.com/common",
                                      "--scope", TestEntra.graph, "--force-refresh"])
        XCTAssertEqual(refresh.status, 0, refresh.stderr)
        let refreshed = try runCommand("/usr/bin/sha256sum", [], stdin: refresh.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        FileManager.default.createFile(atPath: directory + "/refreshed", contents: nil)

        try waitForFile(directory + "/three")
        let deny = try daemon.ctl(["apps", "deny", "exe:\(python)", "--client-id", TestEntra.famA])
        XCTAssertEqual(deny.status, 0, deny.stderr)
        FileManager.default.createFile(atPath: directory + "/denied", contents: nil)

        let result = client.finish()
        let lines = result.stdout.split(separator: "\n"), stderr = result.stderr
        XCTAssertEqual(result.status, 0, stderr)
        let replies = lines.compactMap { line in try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] }
        let answers = replies.compactMap { $0["brokerTokenResponse"] as? [String: Any] }
        XCTAssertEqual(answers.count, 4, "\(lines) \(stderr)")
        guard answers.count == 4 else { return }
        let tokens = answers.map { $0["accessToken"] as? String }
        XCTAssertNotNil(tokens[0], "\(answers[0])")
        XCTAssertEqual(tokens[1], tokens[0], "the same request, nothing changed: the same token")
        XCTAssertEqual(tokens[2], String(refreshed.stdout.prefix(64)), "after the refresh: the new token, not the one given before")
        XCTAssertNotEqual(tokens[2], tokens[0])
        let refusal = answers[3]["error"] as? [String: Any]
        XCTAssertEqual(refusal?["status"] as? Int, 9, "denied since: refused (IncorrectConfiguration), \(answers[3])")
        XCTAssertNil(answers[3]["accessToken"])
        for (answer, reply) in zip(answers.prefix(3), replies) {
            // The second is the first given again (`RememberedBusAnswer`), written around the new call's id.
            XCTAssertEqual(answer["correlationId"] as? String, reply["sentCorrelationId"] as? String, "each answer has its call's correlation id")
        }
        XCTAssertEqual(Set(answers.map { $0["correlationId"] as? String ?? "" }).count, 4, "each answer has its call's correlation id")

        // Every call on the record: the three tokens handed out and the refusal.
        XCTAssertEqual(try handedOut(to: "exe:\(python)"), 3)
        XCTAssertTrue(try auditRows(of: "exe:\(python)").contains { $0["outcome"] as? String == "refused" })
    }

    /// A caller that stays on the bus and nobody reading the audit: its counted hits reach the database when their
    /// 10-second window ends (the bus thread wakes for it), not only when it leaves. Read from apps.db itself, since a
    /// read through brokerd has the counts handed over first.
    func testTheHitsOfACallerThatStaysOnTheBusAreWrittenWhenTheirWindowEnds() throws {
        let call = try signedInCall()
        let client = try RunningCommand("/usr/bin/python3", [
            TestIdP.root + "/Tests/dbus/one_connection.py", call, call, call, "mark:\(directory)/asked", "wait:\(directory)/end",
        ], environment: bus.environment)
        defer {
            FileManager.default.createFile(atPath: directory + "/end", contents: nil)
            _ = client.finish()
        }
        try waitForFile(directory + "/asked")
        var written = ""
        try waitFor("the window's count in apps.db", timeout: 25) {
            written = try runCommand("/usr/bin/python3", ["-c", "import sqlite3, sys; print(*sqlite3.connect(sys.argv[1]).execute("
                                                          + "\"SELECT front_end, outcome, count FROM audit WHERE front_end = 'dbus'\").fetchall())",
                                                          daemon.stateDir + "/apps.db"]).stdout
            return !written.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
        }
        XCTAssertEqual(written.trimmingCharacters(in: .whitespacesAndNewlines), "('dbus', 'cache', 3)", "one row for the three hits")
    }

    private func auditRows(of app: String) throws -> [[String: Any]] {
        let log = try daemon.ctl(["log", "--json", "--app", app])
        XCTAssertEqual(log.status, 0, log.stderr)
        return (try? JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [String: Any])?["entries"] as? [[String: Any]] ?? []
    }

    /// Tokens handed out from the cache to `app`, by the audit.
    private func handedOut(to app: String) throws -> Int {
        try auditRows(of: app).filter { $0["outcome"] as? String == "cache" }.reduce(0) { $0 + ($1["count"] as? Int ?? 0) }
    }
}
