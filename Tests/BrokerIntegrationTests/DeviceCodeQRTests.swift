import BrokerProtocol
import Foundation
import XCTest

/// `brokerctl login --device-code` and `brokerctl watch` show the verification address as a QR code for a phone:
/// a real device-code sign-in at the test IdP, the QR codes brokerctl prints decoded with zbarimg.
final class DeviceCodeQRTests: XCTestCase {
    func testLoginAndWatchShowTheVerificationAddressAsAQRCodeThatDecodes() throws {
        let zbarimg = try requireTool("/usr/bin/zbarimg", package: "zbar-tools")
        let idp = try TestIdP()
        let daemon = try startBroker(idp)
        let logs = TemporaryDirectory("brokerd-qr-logs")
        // The watcher draws half blocks (a UTF-8 locale), the login ASCII (the C locale of an SSH session without one).
        let watchLog = logs.path + "/watch.log", plainWatchLog = logs.path + "/plain-watch.log"
        let loginLog = logs.path + "/login.log"
        let watch = try ChildProcess(Binaries.brokerctl, ["watch", "--qr", "--socket", daemon.socket],
                                     environment: locale("C.UTF-8"), logPath: watchLog)
        let plainWatch = try ChildProcess(Binaries.brokerctl, ["watch", "--socket", daemon.socket],
                                          environment: locale("C.UTF-8"), logPath: plainWatchLog)
        waitFor("both watchers have subscribed") {
            [watchLog, plainWatchLog].allSatisfy { read($0).contains("brokerctl: watching") }
        }

        let login = try ChildProcess(Binaries.brokerctl, ["login", "mail", "--device-code", "--qr", "--config", daemon.configPath,
                                                          "--socket", daemon.socket], environment: locale("C"), logPath: loginLog)
        waitFor("brokerctl shows the code") { read(loginLog).contains("enter the code") }
        let status = try decode(StatusResult.self, try daemon.ctl(["status", "--json"]).stdout)
        let pending = try XCTUnwrap(status.pendingSignIns?.first, "no pending sign-in: \(daemon.log)")
        XCTAssertTrue(pending.verificationUri.hasPrefix(idp.http), pending.verificationUri)

        let shown = read(loginLog)
        XCTAssertTrue(shown.contains("##") && !shown.contains("▀"), "ASCII in the C locale: \(shown)")
        XCTAssertEqual(try TerminalQRReader.decode(shown, zbarimg: zbarimg), pending.verificationUri)

        // The QR code's last line ends by resetting the colours (SGR 0).
        let resetColours = "\u{1B}[0m"
        waitFor("watch shows the waiting sign-in and its QR code") {
            read(watchLog).contains("sign-in waiting") && read(watchLog).contains(resetColours)
        }
        XCTAssertTrue(read(watchLog).contains("▀"), "half blocks in a UTF-8 locale: \(read(watchLog))")
        XCTAssertEqual(try TerminalQRReader.decode(read(watchLog), zbarimg: zbarimg), pending.verificationUri)
        // Without --qr, output that is not a terminal gets the line alone.
        waitFor("the other watcher shows the waiting sign-in") { read(plainWatchLog).contains("sign-in waiting") }
        XCTAssertFalse(read(plainWatchLog).contains("\u{1B}["), read(plainWatchLog))

        try idp.control("/test/approve-device?user_code=\(pending.userCode)&username=alice")
        waitFor("brokerctl login has finished") { !login.isRunning }
        XCTAssertEqual(login.terminationStatus, 0, read(loginLog))
        XCTAssertTrue(read(loginLog).contains("Signed in as alice"), read(loginLog))
        withExtendedLifetime((watch, plainWatch)) {}
    }

    func testQRAndJSONDoNotGoTogetherInWatch() throws {
        let result = try runCommand(Binaries.brokerctl, ["watch", "--json", "--qr", "--socket", "/nonexistent/brokerd.sock"])
        XCTAssertEqual(result.status, 64, result.stderr)
        XCTAssertTrue(result.stderr.contains("--qr does not go with --json"), result.stderr)
    }

    /// This process's environment with the locale set to `name` alone.
    private func locale(_ name: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = nil
        environment["LC_CTYPE"] = nil
        environment["LANG"] = name
        return environment
    }

    private func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
}
