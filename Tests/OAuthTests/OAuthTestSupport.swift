import BrokerJSON
import Foundation
import XCTest
@testable import OAuth

/// Helpers shared by the OAuth tests. Everything here is built independently of the code under test
/// (Foundation's base64, hand-written JSON) so a round trip cannot hide a bug on both sides.
enum TestJWT {
    /// base64url without padding, computed with Foundation (not with `Base64URL`).
    static func base64url(_ bytes: [UInt8]) -> String {
        let standard = Data(bytes).base64EncodedString()
        return String(standard.compactMap { character -> Character? in
            switch character {
            case "+": return "-"
            case "/": return "_"
            case "=": return nil
            default: return character
            }
        })
    }

    static func base64url(_ text: String) -> String { base64url(Array(text.utf8)) }

    /// An unsigned test JWT `header.payload.signature` whose payload is the given JSON text.
    static func make(payload json: String) -> String {
        base64url(#"{"alg":"none","typ":"JWT"}"#) + "." + base64url(json) + "." + "fake-signature"
    }

    /// A JSON object literal from claim pairs; values are written as given (quote strings yourself).
    static func json(_ claims: KeyValuePairs<String, String>) -> String {
        "{" + claims.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }

    static func make(_ claims: KeyValuePairs<String, String>) -> String { make(payload: json(claims)) }
}

/// The case of an `OAuthFailure`, for assertions that must not depend on message wording.
func kind(_ failure: OAuthFailure) -> String {
    switch failure {
    case .oauth: return "oauth"
    case .transient: return "transient"
    case .unreachable: return "unreachable"
    case .invalidResponse: return "invalidResponse"
    case .configuration: return "configuration"
    case .idToken: return "idToken"
    }
}

/// Runs `body`, expects it to throw an `OAuthFailure` of case `expected`, and returns the failure.
@discardableResult
func assertOAuthFailure(_ expected: String, file: StaticString = #filePath, line: UInt = #line,
                        _ body: () throws(OAuthFailure) -> Void) -> OAuthFailure? {
    do {
        try body()
        XCTFail("expected an OAuthFailure.\(expected), but nothing was thrown", file: file, line: line)
        return nil
    } catch {
        XCTAssertEqual(kind(error), expected, "unexpected failure: \(error)", file: file, line: line)
        return error
    }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
