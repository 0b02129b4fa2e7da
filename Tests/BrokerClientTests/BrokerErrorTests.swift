@testable import BrokerClient
import BrokerJSON
import BrokerProtocol
import XCTest

/// The client library's reading of brokerd's JSON-RPC errors (`BrokerError(RPCError)`), code by code, as an app
/// switches on it: MSAL's codes to their cases, the OAuth detail carried along, and codes of later protocol versions
/// read by their range (docs/protocol.md, Versioning rule 3).
final class BrokerErrorTests: XCTestCase {
    private func error(_ code: Int, _ data: JSONObject? = nil) -> BrokerError {
        BrokerError(RPCError(code: code, message: "m\(code)", data: data.map(JSONValue.object)))
    }

    func testEachMSALCodeHasItsCase() {
        let refused = error(-50002, JSONObject(["error": .string("invalid_grant"), "suberror": .string("bad_token"),
                                                "errorCodes": .array([.int(70000)]), "claims": .string("{}"),
                                                "correlationId": .string("c0ffee")]))
        guard case .interactionRequired(let detail) = refused else { return XCTFail("-50002: \(refused)") }
        XCTAssertEqual(detail.error, "invalid_grant")
        XCTAssertEqual(detail.suberror, "bad_token")
        XCTAssertEqual(detail.errorCodes, [70000])
        XCTAssertEqual(detail.claims, "{}")
        XCTAssertEqual(detail.correlationId, "c0ffee")
        XCTAssertEqual(refused.code, -50002)

        let declined = error(-50003, JSONObject(["grantedScopes": .array([.string("mail.read")]),
                                                 "declinedScopes": .array([.string("mail.send")])]))
        guard case .serverDeclinedScopes(let granted, let notGranted, _) = declined else { return XCTFail("-50003: \(declined)") }
        XCTAssertEqual(granted, ["mail.read"])
        XCTAssertEqual(notGranted, ["mail.send"])

        guard case .serverProtectionPoliciesRequired = error(-50004) else { return XCTFail("-50004") }
        guard case .userCanceled(let canceled) = error(-50005), canceled?.message == "m-50005" else { return XCTFail("-50005") }
        guard case .internal = error(-50000) else { return XCTFail("-50000") }
        guard case .internal = error(-32603) else { return XCTFail("-32603, JSON-RPC's internal error") }
        guard case .appNotAllowed = error(-32005) else { return XCTFail("-32005") }
    }

    func testANetworkFailureSaysItMayBeRetried() {
        let unavailable = error(-50006, JSONObject(["reason": .string("unavailable"), "retryable": .bool(true),
                                                    "network": .bool(true), "retryAfter": .int(8)]))
        guard case .serverError(let detail) = unavailable else { return XCTFail("-50006: \(unavailable)") }
        XCTAssertTrue(detail.retryable)
        XCTAssertEqual(detail.reason, "unavailable")
        guard case .serverError(let refused) = error(-50006) else { return XCTFail("-50006 without data") }
        XCTAssertFalse(refused.retryable, "an IdP's refusal is not retried")
    }

    func testARefusalByBrokerdAndTheInvalidRequestsKeepTheirCodes() {
        guard case .brokerRefused(let code, let message) = error(-32002) else { return XCTFail("-32002") }
        XCTAssertEqual(code, -32002)
        XCTAssertEqual(message, "m-32002")
        let invalid = error(-32602, JSONObject(["reason": .string("missingAuthority")]))
        guard case .invalidRequest(let detail) = invalid else { return XCTFail("-32602: \(invalid)") }
        XCTAssertEqual(detail.reason, "missingAuthority")
        XCTAssertEqual(invalid.code, -32602)
        guard case .invalidRequest = error(-32601) else { return XCTFail("-32601, an unknown method") }
    }

    /// Codes a later brokerd may add: in -320xx brokerd did not run the request; in -500xx it failed.
    func testCodesOfLaterVersionsAreReadByTheirRange() {
        guard case .brokerRefused(let code, _) = error(-32042) else { return XCTFail("-32042") }
        XCTAssertEqual(code, -32042)
        guard case .internal = error(-50042) else { return XCTFail("-50042") }
    }

    func testTheClientsOwnFaultsHaveNoCode() {
        XCTAssertNil(BrokerError.brokerNotRunning(socket: "/run/user/1/brokerd.sock", reason: "no such file").code)
        XCTAssertNil(BrokerError.connection("reset").code)
        XCTAssertEqual(BrokerError(CancellationError()).code, -50005, "an app's own cancellation reads as userCanceled")
        XCTAssertEqual(BrokerError.brokerNotRunning(socket: "/s", reason: "r").description, "brokerd is not running at /s (r)")
    }
}
