import BrokerJSON
import BrokerProtocol
import BrokerWire
import XCTest

/// A remembered answer with a new correlation id put in must be the bytes the full encoder writes for it.
final class TokenResultTextTests: XCTestCase {
    func testEveryCorrelationIdGivesTheBytesTheEncoderWrites() throws {
        var result = CoderSamples.tokenResult
        let text = try TokenResultText(result)
        for correlationId in [nil, "", "5f1e7d3c-9a0b-4c2d-8e6f-123456789abc", "quote \" backslash \\ slash / tab \t nul \u{0}",
                              "ünïcødé ✓", String(repeating: "x", count: 5_000)] {
            result.correlationId = correlationId
            XCTAssertEqual(text.json(correlationId: correlationId), try ProtocolCoding.encode(result),
                           "correlationId \(correlationId.map { "\"\($0.prefix(40))\"" } ?? "nil")")
        }
    }

    func testTheResultItWasMadeFromDoesNotLeakItsCorrelationId() throws {
        let text = try TokenResultText(CoderSamples.tokenResult)
        var expected = CoderSamples.tokenResult
        expected.correlationId = nil
        XCTAssertEqual(text.json(correlationId: nil), try ProtocolCoding.encode(expected))
        XCTAssertFalse(String(decoding: text.json(correlationId: nil), as: UTF8.self).contains("correlationId"))
    }

    func testOptionalMembersAroundTheCorrelationIdChangeNothing() throws {
        // With nothing after it or nothing before it, the commas must still come out right.
        var bare = CoderSamples.tokenResult
        bare.refreshOn = 1_700_001_800
        bare.idToken = nil
        bare.grantedScopes = []
        for correlationId in [nil, "c"] {
            bare.correlationId = correlationId
            let text = try TokenResultText(bare)
            let json = text.json(correlationId: correlationId)
            XCTAssertEqual(json, try ProtocolCoding.encode(bare))
            XCTAssertNoThrow(try JSONReader.parse(json))
        }
    }

    func testTheAnswerLinePiecesAreTheEnvelopeTheFullPathWrites() throws {
        var result = CoderSamples.tokenResult
        var bare = result
        bare.idToken = nil
        bare.grantedScopes = []
        for sample in [result, bare] {
            let text = try TokenResultText(sample)
            for (id, correlationId) in [("1", nil), (#""req-7""#, "c-1"), ("123456789012345", #"q""#)] as [(String, String?)] {
                var pieces: [UInt8] = []
                text.withAnswerLinePieces(id: id, correlationId: correlationId) { for piece in $0 { pieces += piece } }
                result = sample
                result.correlationId = correlationId
                let expected = RPCEnvelope.success(id: id, resultJSON: try ProtocolCoding.encode(result)) + [UInt8(ascii: "\n")]
                XCTAssertEqual(pieces, expected, "id \(id)")
                XCTAssertEqual(text.answerLine(id: id, correlationId: correlationId), Array(expected.dropLast()))
            }
        }
    }

    /// The direct writer against the encoder on results of every shape: optional members present and absent, empty
    /// and several apps, tokens and tenant profiles, strings that need escapes, claims with unsorted keys and numbers
    /// the encoder rewrites.
    func testTheDirectWriterWritesTheEncodersBytesForEveryShape() throws {
        var seed: UInt64 = 42
        func next() -> UInt64 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return seed >> 33
        }
        func maybe<T>(_ value: T) -> T? { next() % 2 == 0 ? value : nil }
        let texts = ["", "plain", "quote \" back \\ slash / tab \t nl \n nul \u{0}", "ünïcødé ✓", "x\u{1F}y"]
        func text() -> String { texts[Int(next() % UInt64(texts.count))] + String(next() % 100) }
        var keptApart = 0
        let claims: [JSONValue] = [
            .object(JSONObject(["z": .number("1.0e3"), "a": .string("b"), "m": .array([.bool(true), .null, .number("12")])])),
            try JSONReader.parse(#"{"tid":"t","nested":{"y":1,"x":[{"b":2,"a":1}]},"exp":1700000000}"#),
            .raw(#"{"b": 1, "a": "raw"}"#),
        ]
        for _ in 0..<300 {
            let apps = (0..<Int(next() % 3)).map { _ in
                AppTokens(clientId: text(), familyId: maybe("1"), hasRefreshToken: next() % 2 == 0,
                          accessTokens: (0..<Int(next() % 3)).map { _ in
                              AccessTokenInfo(scopes: (0..<Int(next() % 3)).map { _ in text() }, realm: maybe(text()),
                                              expiresOn: maybe(Int64(next()) - 1_000_000))
                          })
            }
            let account = Account(homeAccountId: text(), username: text(), environment: text(), realm: text(),
                                  localAccountId: maybe(text()), name: maybe(text()), authorityType: maybe("MSSTS"),
                                  tenantProfiles: (0..<Int(next() % 3)).map { _ in
                                      TenantProfile(realm: text(), environment: text(), localAccountId: maybe(text()),
                                                    username: maybe(text()))
                                  },
                                  apps: apps, hiddenFrom: (0..<Int(next() % 2)).map { _ in text() },
                                  signInRequired: next() % 2 == 0,
                                  accountClaims: maybe(claims[Int(next() % UInt64(claims.count))]))
            let result = TokenResult(accessToken: text(), tokenType: maybe("Bearer") ?? "pop", expiresOn: Int64(next()),
                                     extendedExpiresOn: -Int64(next()), refreshOn: maybe(Int64(next())),
                                     grantedScopes: (0..<Int(next() % 3)).map { _ in text() }, idToken: maybe(text()),
                                     account: account, authority: text(), correlationId: nil, source: "cache")
            let expected = String(decoding: try ProtocolCoding.encode(result), as: UTF8.self)
            XCTAssertEqual(String(decoding: try TokenResultText(result).json(correlationId: nil), as: UTF8.self), expected)
            // With the account written on its own first, as a cache hit makes the text; and with the tokens kept
            // apart, as a hit whose tokens need no escape makes it.
            let plain = JSONWriter.needsNoEscape(result.accessToken) && result.idToken.map(JSONWriter.needsNoEscape) ?? true
            for apart in plain ? [false, true] : [false] {
                let pieces = TokenResultText(accessToken: result.accessToken, tokenType: result.tokenType,
                                             expiresOn: result.expiresOn, extendedExpiresOn: result.extendedExpiresOn,
                                             refreshOn: result.refreshOn, grantedScopes: result.grantedScopes,
                                             idToken: result.idToken, accountJSON: try TokenResultText.accountJSON(result.account),
                                             authority: result.authority, source: result.source, tokensNeedNoEscape: apart)
                XCTAssertEqual(String(decoding: pieces.json(correlationId: nil), as: UTF8.self), expected, "apart: \(apart)")
                var withId = result
                withId.correlationId = "c-\(next())"
                XCTAssertEqual(pieces.json(correlationId: withId.correlationId), try ProtocolCoding.encode(withId))
                let line = RPCEnvelope.success(id: "7", resultJSON: try ProtocolCoding.encode(withId))
                XCTAssertEqual(pieces.answerLine(id: "7", correlationId: withId.correlationId), line)
                if apart { keptApart += 1 }
            }
        }
        XCTAssertGreaterThan(keptApart, 50, "the kept-apart form was tried too")
        for value in [Int64.min, .min + 1, -10, -9, -1, 0, 1, 9, 10, 99, 100, 1_700_000_000, .max - 1, .max] {
            var out: [UInt8] = [0x78]
            JSONWriter.writeInteger(value, into: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), "x\(value)")
        }
    }

    /// Which bytes need an escape: JSON's (control characters, quote, backslash), anywhere in a long string.
    func testATokenNeedsNoEscapeUnlessAByteOfItDoes() {
        let token = String(repeating: "eyJhbGciOi.-_", count: 100)
        XCTAssertTrue(JSONWriter.needsNoEscape(token))
        XCTAssertTrue(JSONWriter.needsNoEscape(""))
        XCTAssertTrue(JSONWriter.needsNoEscape("ünïcødé ✓"))
        for byte in ["\"", "\\", "\n", "\u{0}", "\u{1F}"] {
            for position in [0, 5, 700, token.utf8.count] {
                var bad = token
                bad.insert(contentsOf: byte, at: bad.index(bad.startIndex, offsetBy: position))
                XCTAssertFalse(JSONWriter.needsNoEscape(bad), "\(byte.debugDescription) at \(position)")
            }
        }
    }
}
