import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// The client library asks brokerd's protocol version as each connection opens, without waiting for the answer
/// before a read goes out (BrokerConnection): a brokerd of another major version must still be refused, and a call
/// that changes something must never reach it. brokerd itself has one version, so the other one is
/// Tests/idp/other_protocol_broker.py.
final class ProtocolVersionCheckTests: XCTestCase {
    /// The stand-in, listening; `methods` reads what it was asked, in order.
    private struct OtherBroker {
        let directory: TemporaryDirectory
        let process: ChildProcess
        var socket: String { directory.path + "/s.sock" }
        var methods: [String] {
            ((try? String(contentsOfFile: directory.path + "/methods.log", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        func stop() {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    private func otherBroker(protocolVersion: String) throws -> OtherBroker {
        let directory = TemporaryDirectory("brokerd-other")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("idp/other_protocol_broker.py").path
        let process = try ChildProcess("/usr/bin/python3", [script, directory.path + "/s.sock", protocolVersion,
                                                            directory.path + "/methods.log"],
                                       environment: [:], logPath: directory.path + "/server.log")
        let other = OtherBroker(directory: directory, process: process)
        waitFor("the stand-in broker's socket") { FileManager.default.fileExists(atPath: other.socket) }
        return other
    }

    func testABrokerdOfAnotherMajorVersionIsRefusedAndNothingThatChangesReachesIt() async throws {
        try await assertRefusedWithNothingChanged(blockingCalls: false)
    }

    /// The same with `blockingCalls` (brokerctl token): plain system calls instead of SwiftNIO.
    func testBlockingCallsRefuseAnotherMajorVersionAndSendNothingThatChanges() async throws {
        try await assertRefusedWithNothingChanged(blockingCalls: true)
    }

    private func assertRefusedWithNothingChanged(blockingCalls: Bool) async throws {
        let other = try otherBroker(protocolVersion: "9.0")
        defer { other.stop() }

        // A read goes out right behind the version question (and is answered before it), but its answer is not
        // returned.
        let app = PublicClientApplication(clientId: "app", socketPath: other.socket, blockingCalls: blockingCalls)
        do {
            _ = try await app.allAccounts()
            XCTFail("an answer from a brokerd of protocol 9.0 was returned")
        } catch .incompatibleBroker(let version) {
            XCTAssertEqual(version, "9.0")
        }
        XCTAssertEqual(other.methods, ["getBrokerVersion", "getAccounts"], "the read was not sent behind the question")

        // A change waits for the answer, and so is never sent.
        let someone = BrokerAccount(Account(homeAccountId: "someone", username: "", environment: "", realm: "",
                                            localAccountId: nil, name: nil, authorityType: nil, tenantProfiles: [],
                                            apps: [], hiddenFrom: [], signInRequired: false))
        do {
            try await app.remove(someone)
            XCTFail("a removal went to a brokerd of protocol 9.0")
        } catch .incompatibleBroker(let version) {
            XCTAssertEqual(version, "9.0")
        }
        XCTAssertFalse(other.methods.contains("removeAccount"), "\(other.methods)")
    }

    func testBlockingCallsShareOneConnectionWithOneVersionCheck() async throws {
        let other = try otherBroker(protocolVersion: brokerProtocolVersion)
        defer { other.stop() }
        let app = PublicClientApplication(clientId: "app", socketPath: other.socket, blockingCalls: true)
        let first = try await app.allAccounts()
        let second = try await app.allAccounts()
        XCTAssertEqual(first.count + second.count, 0)
        XCTAssertEqual(other.methods, ["getBrokerVersion", "getAccounts", "getAccounts"])
    }

    func testTheSameMajorVersionIsServed() async throws {
        let other = try otherBroker(protocolVersion: brokerProtocolVersion)
        defer { other.stop() }
        let control = BrokerControl(socketPath: other.socket)
        let accounts = try await control.accounts()
        XCTAssertEqual(accounts.count, 0)
        XCTAssertEqual(other.methods, ["getBrokerVersion", "getAccounts"])
    }
}
