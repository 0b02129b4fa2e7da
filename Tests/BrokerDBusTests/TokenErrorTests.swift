@testable import BrokerCore
@testable import BrokerDBus
import BrokerJSON
import XCTest

/// broker1's reading of a broker failure (`Broker1Methods.tokenError`), case by case: the status msal-python and
/// libmsalruntime act on, the tag that says which branch wrote it, the IdP's error code and the context text.
final class TokenErrorTests: XCTestCase {
    private func error(_ failure: TokenFailure) -> (status: Int?, tag: Int?, code: Int?, context: String?) {
        let error = Broker1Methods.tokenError(failure).objectValue?["brokerTokenResponse"]?.objectValue?["error"]?.objectValue
        return (error?["status"]?.integerValue.map(Int.init), error?["tag"]?.integerValue.map(Int.init),
                error?["errorCode"]?.integerValue.map(Int.init), error?["context"]?.stringValue)
    }

    func testEachFailureHasItsStatusAndTag() {
        let refused = IdPError(error: "invalid_grant", errorDescription: "AADSTS70000: the grant is expired", errorCodes: [70000])
        let interaction = error(.interactionRequired("the refresh token was refused", refused))
        XCTAssertEqual(interaction.status, Broker1Status.interactionRequired.rawValue)
        XCTAssertEqual(interaction.tag, 0x6272_0020)
        XCTAssertEqual(interaction.code, 70000, "the IdP's first error code")
        XCTAssertEqual(interaction.context, "interaction required: the refresh token was refused | AADSTS70000: the grant is expired")

        let canceled = error(.userCanceled("the sign-in was declined"))
        XCTAssertEqual(canceled.status, Broker1Status.userCanceled.rawValue)
        XCTAssertEqual(canceled.tag, 0x6272_0021)
        XCTAssertEqual(canceled.code, 0)

        let unavailable = error(.unavailable("cannot reach login.example", retryAfter: 4))
        XCTAssertEqual(unavailable.status, Broker1Status.serverTemporarilyUnavailable.rawValue)
        XCTAssertEqual(unavailable.tag, 0x6272_0022)

        let declined = error(.serverDeclinedScopes(granted: ["mail.read"], declined: ["mail.send"]))
        XCTAssertEqual(declined.status, Broker1Status.apiContractViolation.rawValue)
        XCTAssertEqual(declined.tag, 0x6272_0023)

        for failure: TokenFailure in [.protectionPoliciesRequired(IdPError(error: "unauthorized_client")),
                                      .serverError("invalid_scope", nil), .internal("no Account entry")] {
            XCTAssertEqual(error(failure).status, Broker1Status.unexpected.rawValue, "\(failure)")
            XCTAssertEqual(error(failure).tag, 0x6272_0025, "\(failure)")
        }
    }

    /// Each reason an invalid request can have, with the status that makes the client report it rightly: an
    /// untrusted authority as such, a configuration problem as one, anything else as the app's mistake.
    func testEachInvalidRequestReasonHasItsStatus() {
        let expected: [InvalidRequestReason: Broker1Status] = [
            .untrustedAuthority: .authorityUntrusted,
            .missingAuthority: .incorrectConfiguration, .invalidAuthority: .incorrectConfiguration,
            .discoveryFailed: .incorrectConfiguration,
            .ambiguousAccount: .apiContractViolation, .missingScopes: .apiContractViolation,
            .interactiveFlowRunning: .apiContractViolation,
        ]
        XCTAssertEqual(Set(expected.keys), Set(InvalidRequestReason.allCases), "every reason is mapped here")
        for (reason, status) in expected {
            let answer = error(.invalidRequest("why", reason: reason))
            XCTAssertEqual(answer.status, status.rawValue, "\(reason)")
            XCTAssertEqual(answer.tag, 0x6272_0024, "\(reason)")
            XCTAssertEqual(answer.context, "why")
        }
    }
}
