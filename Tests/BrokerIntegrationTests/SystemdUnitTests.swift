import Foundation
import XCTest

/// The shipped user units pass `systemd-analyze verify` with the brokerd binary under test as ExecStart=.
final class SystemdUnitTests: XCTestCase {
    func testUnitsVerifyCleanly() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            throw missing("systemd-analyze (package systemd) is not installed")
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let result = try runCommand("/bin/sh", [root.path + "/systemd/verify.sh", Binaries.brokerd])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("verify cleanly"), result.stdout)
    }

    /// The units say what SPEC §7 asks for; a change that drops one of these is caught here, not in production.
    func testUnitsCarryTheRequiredSettings() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let socket = try String(contentsOfFile: root.path + "/systemd/brokerd.socket", encoding: .utf8)
        for line in ["ListenStream=%t/brokerd/brokerd.sock", "SocketMode=0600", "DirectoryMode=0700", "WantedBy=sockets.target"] {
            XCTAssertTrue(socket.contains("\n" + line + "\n"), "brokerd.socket lacks \(line)")
        }
        let service = try String(contentsOfFile: root.path + "/systemd/brokerd.service", encoding: .utf8)
        for line in ["Type=notify", "Restart=on-failure", "NoNewPrivileges=yes", "LockPersonality=yes",
                     "MemoryDenyWriteExecute=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
                     "SystemCallFilter=@system-service"] {
            XCTAssertTrue(service.contains("\n" + line + "\n"), "brokerd.service lacks \(line)")
        }
        XCTAssertTrue(service.contains("\nWatchdogSec="), "brokerd.service lacks WatchdogSec=")
        XCTAssertTrue(service.contains("\nBusName=com.microsoft.identity.broker1\n"), "brokerd.service lacks BusName=")
        XCTAssertTrue(service.contains("\nRequires=brokerd.socket\n"),
                      "D-Bus activation starts brokerd.service alone: it must bring up the socket it serves")
    }

    /// The session bus's activation file: the name brokerd owns, started as brokerd.service (a bus under systemd)
    /// or by Exec= (any other bus). verify.sh compares it with the unit; this says the check ran and passed.
    func testDBusActivationFileStartsTheUnit() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let file = try String(contentsOfFile: root.path + "/systemd/com.microsoft.identity.broker1.service", encoding: .utf8)
        let lines = file.split(separator: "\n").map(String.init)
        for line in ["[D-BUS Service]", "Name=com.microsoft.identity.broker1", "Exec=/usr/bin/brokerd",
                     "SystemdService=brokerd.service"] {
            XCTAssertTrue(lines.contains(line), "the activation file lacks \(line)")
        }
        let verify = try runCommand("/bin/sh", [root.path + "/systemd/verify.sh", "/bin/true"])
        XCTAssertTrue(verify.stdout.contains("activates brokerd.service as com.microsoft.identity.broker1"),
                      verify.stdout + verify.stderr)
    }
}
