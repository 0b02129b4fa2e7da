import BrokerJSON
import BrokerProtocol
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
}
