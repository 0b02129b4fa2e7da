import BrokerCore
import BrokerJSON
import BrokerProtocol
@testable import BrokerServer
import XCTest

/// The socket front end's pure translations: a broker failure as the JSON-RPC error an app gets, case by case, and the
/// queue of requests read beyond a connection's in-flight limit.
final class TranslationTests: XCTestCase {
    private func data(_ error: RPCError) -> JSONObject { error.data?.objectValue ?? JSONObject() }

    func testANetworkFailureIsRetryableAndSaysWhenToTryAgain() {
        let error = RequestRouter.rpcError(.unavailable("cannot reach login.example: timed out", retryAfter: 8))
        XCTAssertEqual(error.code, -50006)
        XCTAssertEqual(error.message, "cannot reach login.example: timed out")
        XCTAssertEqual(data(error)["reason"], .string("unavailable"))
        XCTAssertEqual(data(error)["retryable"], .bool(true))
        XCTAssertEqual(data(error)["network"], .bool(true))
        XCTAssertEqual(data(error)["retryAfter"]?.integerValue, 8)
    }

    func testAServerThatCouldNotAnswerIsRetryableWithoutANetworkMark() {
        let error = RequestRouter.rpcError(.unavailable("HTTP 503"))
        XCTAssertEqual(error.code, -50006)
        XCTAssertEqual(data(error)["retryable"], .bool(true))
        XCTAssertNil(data(error)["network"])
        XCTAssertNil(data(error)["retryAfter"])
    }

    func testEachFailureHasItsCode() {
        let refused = IdPError(error: "invalid_grant", errorDescription: "AADSTS70000: expired", errorCodes: [70000],
                               suberror: "bad_token", claims: "{}", correlationId: "c0ffee")
        let interaction = RequestRouter.rpcError(.interactionRequired("the refresh token was refused", refused))
        XCTAssertEqual(interaction.code, -50002)
        XCTAssertEqual(data(interaction)["error"], .string("invalid_grant"))
        XCTAssertEqual(data(interaction)["suberror"], .string("bad_token"))
        XCTAssertEqual(data(interaction)["classification"], .string(RequestRouter.classification(of: "bad_token")))
        XCTAssertEqual(data(interaction)["errorCodes"], .array([.int(70000)]))
        XCTAssertEqual(data(interaction)["correlationId"], .string("c0ffee"))
        XCTAssertEqual(data(interaction)["claims"], .string("{}"))

        let declined = RequestRouter.rpcError(.serverDeclinedScopes(granted: ["mail.read"], declined: ["mail.send"]))
        XCTAssertEqual(declined.code, -50003)
        XCTAssertEqual(data(declined)["grantedScopes"], .array([.string("mail.read")]))
        XCTAssertEqual(data(declined)["declinedScopes"], .array([.string("mail.send")]))

        XCTAssertEqual(RequestRouter.rpcError(.protectionPoliciesRequired(IdPError(error: "unauthorized_client"))).code, -50004)
        XCTAssertEqual(RequestRouter.rpcError(.userCanceled("the sign-in was declined")).code, -50005)
        XCTAssertEqual(RequestRouter.rpcError(.serverError("invalid_scope", nil)).code, -50006)
        XCTAssertNil(RequestRouter.rpcError(.serverError("invalid_scope", nil)).data, "no OAuth detail, no data")
        XCTAssertEqual(RequestRouter.rpcError(.internal("no Account entry")).code, -50000)

        let invalid = RequestRouter.rpcError(.invalidRequest("no authority", reason: .missingAuthority))
        XCTAssertEqual(invalid.code, -32602)
        XCTAssertEqual(data(invalid)["reason"], .string("missingAuthority"))
    }

    /// Every reason an invalid request can have reaches the app as -32602 with the reason's own word.
    func testEachInvalidRequestReasonIsItsWordOnTheWire() {
        for reason in InvalidRequestReason.allCases {
            let error = RequestRouter.rpcError(.invalidRequest("why", reason: reason))
            XCTAssertEqual(error.code, -32602, "\(reason)")
            XCTAssertEqual(error.message, "why")
            XCTAssertEqual(data(error)["reason"], .string(reason.rawValue))
        }
        XCTAssertEqual(InvalidRequestReason.allCases.map(\.rawValue).sorted(),
                       ["ambiguousAccount", "discoveryFailed", "interactiveFlowRunning", "invalidAuthority", "missingAuthority",
                        "missingScopes", "untrustedAuthority"], "the words docs/protocol.md lists")
    }

    func testTheWaitingQueueIsFirstInFirstOut() {
        var queue = FIFOQueue<Int>()
        XCTAssertTrue(queue.isEmpty)
        XCTAssertNil(queue.popFirst())
        var expected: [Int] = [], taken: [Int] = []
        // Interleaved appends and takes, so that the storage is compacted in every state.
        for round in 0..<50 {
            for value in 0..<(round % 7) { queue.append(round * 10 + value); expected.append(round * 10 + value) }
            for _ in 0..<(round % 5) { if let value = queue.popFirst() { taken.append(value) } }
            XCTAssertEqual(queue.count, expected.count - taken.count)
        }
        while let value = queue.popFirst() { taken.append(value) }
        XCTAssertEqual(taken, expected)
        XCTAssertTrue(queue.isEmpty)
    }
}
