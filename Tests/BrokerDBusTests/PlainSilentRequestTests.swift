@testable import BrokerDBus
import BrokerJSON
import XCTest

/// The cache hit's reading of a broker1 silent request (`Broker1Requests.plainSilent`) against the full path's
/// (`validated`, then the members read from the object): the same request, or nil (the full path decides), on the
/// request as pymsalruntime sends it and on every variant of each member a client could send.
final class PlainSilentRequestTests: XCTestCase {
    private static let account: JSONObject = JSONObject([
        "alternativeAccountId": .string(""), "clientInfo": .string("eyJ1aWQiOiJ1MSIsInV0aWQiOiJ0MSJ9"),
        "environment": .string("login.microsoftonline.com"), "homeAccountId": .string("u1.t1"),
        "localAccountId": .string("u1"), "name": .string("Ada"), "passwordExpiry": .number("0"),
        "realm": .string("t1"), "username": .string("ada@contoso.example"),
    ])

    private static let auth: JSONObject = JSONObject([
        "accessTokenToRenew": .string(""), "account": .object(account),
        "additionalQueryParametersForAuthorization": .object(JSONObject(["msal_client_sku": .string("MSAL.Python")])),
        "authority": .string("https://login.microsoftonline.com/t1"), "authorizationType": .number("1"),
        "clientId": .string("04b07795-8ddb-461a-bbee-02f9e1bf7b46"), "decodedClaims": .string(""),
        "isTestMode": .bool(false), "popParams": .null,
        "redirectUri": .string("https://login.microsoftonline.com/common/oauth2/nativeclient"),
        "requestedScopes": .array([.string("https://graph.microsoft.com/User.Read"), .string("offline_access")]),
        "username": .string("ada@contoso.example"), "uxContextHandle": .number("-1"),
    ])

    /// The full path's reading, as `cachedAnswer` made it before `plainSilent`.
    private func fullPath(_ request: String, correlationId: String = "c") -> PlainSilentRequest? {
        guard case .success(let params) = Broker1Requests.validated(method: "acquireTokenSilently", correlationId: correlationId,
                                                                     request: request),
              let auth = params["authParameters"]?.objectValue, let clientId = auth["clientId"]?.stringValue, !clientId.isEmpty,
              let hid = auth["account"]?.objectValue?["homeAccountId"]?.stringValue, !hid.isEmpty,
              (auth["decodedClaims"]?.stringValue ?? "").isEmpty else { return nil }
        return PlainSilentRequest(clientId: clientId, authority: auth["authority"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 },
                                  scopes: auth["requestedScopes"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                                  homeAccountId: hid)
    }

    private func text(_ auth: JSONObject, extra: [JSONObject.Member] = []) -> String {
        var top = JSONObject(["authParameters": .object(auth)])
        top.members.append(contentsOf: extra)
        return JSONWriter().string(.object(top))
    }

    func testThePlainRequestIsReadAsTheFullPathReadsIt() throws {
        let request = text(Self.auth)
        let plain = try XCTUnwrap(Broker1Requests.plainSilent(correlationId: "c", request: Array(request.utf8)))
        XCTAssertEqual(plain, fullPath(request))
        XCTAssertEqual(plain.scopes, ["https://graph.microsoft.com/User.Read", "offline_access"])
        XCTAssertEqual(plain.homeAccountId, "u1.t1")
    }

    func testEveryVariantOfAMemberIsReadAsTheFullPathReadsItOrLeftToIt() {
        let values: [JSONValue] = [.null, .string(""), .string("x"), .string("e\"sc\\ap\u{e9}d"), .number("7"), .bool(true),
                                   .array([]), .array([.string("a"), .string("B")]), .array([.string("a"), .number("1")]),
                                   .object(JSONObject()), .object(JSONObject(["homeAccountId": .string("u2.t2")])),
                                   .object(JSONObject(["homeAccountId": .number("1")])),
                                   .object(JSONObject(["homeAccountId": .null]))]
        var checked = 0
        for key in ["clientId", "authority", "username", "decodedClaims", "requestedScopes", "account", "popParams"] {
            var without = Self.auth
            without[key] = nil
            let variants = [without] + values.map { value -> JSONObject in
                var changed = Self.auth
                changed[key] = value
                return changed
            }
            for variant in variants {
                let request = text(variant)
                XCTAssertEqual(Broker1Requests.plainSilent(correlationId: "c", request: Array(request.utf8)), fullPath(request), request)
                checked += 1
            }
            // Given twice: the full path reads the first; the hit leaves it to the full path.
            var twice = Self.auth
            twice.members.append(.init(key: key, value: Self.auth[key] ?? .null))
            let request = text(twice)
            if let plain = Broker1Requests.plainSilent(correlationId: "c", request: Array(request.utf8)) {
                XCTAssertEqual(plain, fullPath(request), request)
                XCTAssertEqual(key, "popParams", "only a member the hit does not read may be given twice")
            }
        }
        XCTAssertEqual(checked, 7 * (values.count + 1))
        // The rest of the request: members beside authParameters, authParameters given twice, limits, not JSON.
        let plain = text(Self.auth)
        let cases: [(String, String)] = [
            (text(Self.auth, extra: [.init(key: "requestOptions", value: .object(JSONObject(["a": .array([.null])])))]), "c"),
            (text(Self.auth, extra: [.init(key: "authParameters", value: .object(Self.auth))]), "c"),
            (plain, String(repeating: "c", count: Broker1Requests.maximumCorrelationIdBytes + 1)),
            (String(plain.dropLast()), "c"), (plain + " x", "c"), ("[]", "c"), (#"{"authParameters":[]}"#, "c"),
            (#"{"authParameters":{"clientId":"a","account":{"homeAccountId":"h.t"},"requestedScopes":["s"],"junk":[1,}}"#, "c"),
        ]
        for (index, (request, correlationId)) in cases.enumerated() {
            let hit = Broker1Requests.plainSilent(correlationId: correlationId, request: Array(request.utf8))
            if index == 1 {
                XCTAssertNil(hit, "authParameters twice: the full path reads the first")
                XCTAssertNotNil(fullPath(request, correlationId: correlationId))
            } else {
                XCTAssertEqual(hit, fullPath(request, correlationId: correlationId), request)
            }
        }
        XCTAssertNotNil(Broker1Requests.plainSilent(correlationId: "c", request: Array(cases[0].0.utf8)), "a member it does not read")
    }
}
