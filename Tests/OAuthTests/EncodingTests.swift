import BrokerJSON
import Foundation
import XCTest
@testable import OAuth

final class Base64URLTests: XCTestCase {
    /// RFC 4648 §10 test vectors (standard alphabet; none of them uses '+' or '/').
    private let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    func testRFC4648VectorsEncodeWithoutPadding() {
        for (plain, padded) in rfc4648 {
            let unpadded = String(padded.filter { $0 != "=" })
            XCTAssertEqual(Base64URL.encode(Array(plain.utf8)), unpadded, "encode(\"\(plain)\")")
        }
    }

    func testRFC4648VectorsDecodePaddedAndUnpadded() {
        for (plain, padded) in rfc4648 {
            XCTAssertEqual(Base64URL.decode(padded), Array(plain.utf8), "decode(\"\(padded)\")")
            XCTAssertEqual(Base64URL.decode(padded.filter { $0 != "=" }), Array(plain.utf8), "decode unpadded \(padded)")
        }
    }

    /// RFC 7636 Appendix B: the 32 octets of the example verifier and its base64url form.
    func testRFC7636OctetsVector() {
        let octets: [UInt8] = [116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186,
                               22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121]
        XCTAssertEqual(Base64URL.encode(octets), "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        XCTAssertEqual(Base64URL.decode("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"), octets)
    }

    func testRoundTripOfEveryLengthAgainstFoundation() {
        for length in 0...64 {
            let input = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ length &* 31 &+ 251) }
            let expected = TestJWT.base64url(input)  // Foundation, alphabet swapped, padding stripped
            let encoded = Base64URL.encode(input)
            XCTAssertEqual(encoded, expected, "length \(length)")
            XCTAssertFalse(encoded.contains("="), "length \(length): no padding")
            XCTAssertEqual(Base64URL.decode(encoded), input, "length \(length): decode(encode(x)) == x")
            // The same bytes as padded standard base64 ('+', '/', '=') must decode too (client_info does that).
            XCTAssertEqual(Base64URL.decode(Data(input).base64EncodedString()), input, "length \(length): standard base64")
        }
    }

    func testAllByteValuesUseBothExtraCharacters() {
        let input = (0...255).map { UInt8($0) }
        let encoded = Base64URL.encode(input)
        XCTAssertTrue(encoded.contains("-") && encoded.contains("_"))
        XCTAssertFalse(encoded.contains("+") || encoded.contains("/"))
        XCTAssertEqual(Base64URL.decode(encoded), input)
    }

    func testStandardAlphabetCharactersDecodeLikeURLAlphabet() {
        // 0xFB 0xFF 0xBF is "+/+/" in standard base64 and "-_-_" in base64url.
        XCTAssertEqual(Base64URL.encode([0xFB, 0xFF, 0xBF]), "-_-_")
        XCTAssertEqual(Base64URL.decode("+/+/"), [0xFB, 0xFF, 0xBF])
        XCTAssertEqual(Base64URL.decode("-_-_"), [0xFB, 0xFF, 0xBF])
    }

    func testInvalidInputIsRejected() {
        for text in ["Zm9v!", "Zm 9v", "Zm9v\n", "Zm9v.", "Zm9vä", "Z", "Zm9vY", "Zm9vY===", "*"] {
            XCTAssertNil(Base64URL.decode(text), "\"\(text.debugDescription)\" must be rejected")
        }
    }

    /// The decoder's contract is "base64url or base64, padded or not; nil for anything else": '=' may only end the
    /// text, so characters after the padding make it invalid rather than being silently ignored.
    func testDataAfterPaddingIsRejected() {
        for text in ["Zg==Zm9v", "Zm8=!", "Zg==\u{0}"] {
            XCTAssertNil(Base64URL.decode(text), "\"\(text.debugDescription)\" must be rejected")
        }
    }
}

final class PKCETests: XCTestCase {
    /// RFC 7636 Appendix B, the published verifier/challenge pair.
    func testRFC7636AppendixBVector() {
        let pkce = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        XCTAssertEqual(pkce.verifier, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        XCTAssertEqual(pkce.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        XCTAssertEqual(pkce.method, "S256")
    }

    func testRandomVerifiersAreWellFormedAndDistinct() {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var seen = Set<String>()
        for _ in 0..<50 {
            let pkce = PKCE()
            XCTAssertEqual(pkce.verifier.count, 43, "32 random bytes give 43 characters (RFC 7636 §4.1 minimum)")
            XCTAssertTrue(pkce.verifier.allSatisfy { allowed.contains($0) }, pkce.verifier)
            XCTAssertEqual(pkce.challenge.count, 43)
            XCTAssertTrue(pkce.challenge.allSatisfy { allowed.contains($0) }, pkce.challenge)
            XCTAssertNotEqual(pkce.challenge, pkce.verifier)
            XCTAssertEqual(PKCE(verifier: pkce.verifier).challenge, pkce.challenge, "challenge is a function of the verifier")
            seen.insert(pkce.verifier)
        }
        XCTAssertEqual(seen.count, 50, "verifiers must not repeat")
    }

    func testRandomTokenLengths() {
        XCTAssertEqual(PKCE.randomToken(bytes: 16).count, 22)
        XCTAssertEqual(PKCE.randomToken(bytes: 32).count, 43)
        XCTAssertEqual(PKCE.randomToken(bytes: 0), "")
        XCTAssertEqual(Base64URL.decode(PKCE.randomToken(bytes: 24))?.count, 24)
        XCTAssertNotEqual(PKCE.randomToken(bytes: 16), PKCE.randomToken(bytes: 16))
    }
}

final class FormEncodingTests: XCTestCase {
    func testEscapeReservedCharacters() {
        XCTAssertEqual(FormEncoding.escape("a b+c/d=e&f?g#h%i"), "a%20b%2Bc%2Fd%3De%26f%3Fg%23h%25i")
        XCTAssertEqual(FormEncoding.escape("AZaz09-._~"), "AZaz09-._~", "unreserved characters stay")
        XCTAssertEqual(FormEncoding.escape("*:@!'()"), "%2A%3A%40%21%27%28%29")
        XCTAssertEqual(FormEncoding.escape(""), "")
    }

    func testEscapeMultibyteUTF8() {
        XCTAssertEqual(FormEncoding.escape("é"), "%C3%A9")
        XCTAssertEqual(FormEncoding.escape("€"), "%E2%82%AC")
        XCTAssertEqual(FormEncoding.escape("😀"), "%F0%9F%98%80")
    }

    func testEncodeFields() {
        let body = FormEncoding.encode([
            ("grant_type", "authorization_code"), ("scope", "openid profile offline_access"),
            ("redirect_uri", "http://localhost:8400/"), ("code", "fake-code+/="),
        ])
        XCTAssertEqual(body, "grant_type=authorization_code&scope=openid%20profile%20offline_access"
            + "&redirect_uri=http%3A%2F%2Flocalhost%3A8400%2F&code=fake-code%2B%2F%3D")
        XCTAssertEqual(FormEncoding.encode([]), "")
        XCTAssertEqual(FormEncoding.encode([("a&b", "c=d")]), "a%26b=c%3Dd")
    }

    func testDecodePlusAndPercentEscapes() {
        let fields = FormEncoding.decode("a=1&b=x%20y&c=hello+world&d=%e2%82%AC&e=%2B")
        XCTAssertEqual(fields, ["a": "1", "b": "x y", "c": "hello world", "d": "€", "e": "+"])
    }

    func testDecodeEdgeCases() {
        XCTAssertEqual(FormEncoding.decode(""), [:])
        XCTAssertEqual(FormEncoding.decode("flag"), ["flag": ""])
        XCTAssertEqual(FormEncoding.decode("a=b=c"), ["a": "b=c"], "only the first '=' separates")
        XCTAssertEqual(FormEncoding.decode("&&a=1&"), ["a": "1"])
        XCTAssertEqual(FormEncoding.decode("a=1&a=2"), ["a": "2"], "later duplicates win")
        XCTAssertEqual(FormEncoding.decode("code=fake-0.AX%3D%3D&state=s"), ["code": "fake-0.AX==", "state": "s"])
    }

    func testInvalidEscapesDropThePair() {
        XCTAssertEqual(FormEncoding.decode("a=%zz&b=2"), ["b": "2"])
        XCTAssertEqual(FormEncoding.decode("b=2&a=%4"), ["b": "2"])
        XCTAssertEqual(FormEncoding.decode("a=%&b=2"), ["b": "2"])
        XCTAssertEqual(FormEncoding.decode("%g1=x&b=2"), ["b": "2"], "a bad name drops the pair too")
        XCTAssertEqual(FormEncoding.decode("a=%FF&b=2"), ["b": "2"], "invalid UTF-8 is dropped")
        XCTAssertNil(FormEncoding.unescape("%C3"), "a truncated UTF-8 sequence is not a string")
    }

    func testRoundTrip() {
        let fields: [(String, String)] = [
            ("state", "fake-state_~.-"), ("claims", #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#),
            ("login_hint", "Zoë Ünïcödé+tag@example.com"), ("empty", ""), ("spaces", "  a  b  "),
            ("weird", "a&b=c%d+e/f?g#h"),
        ]
        let decoded = FormEncoding.decode(FormEncoding.encode(fields))
        XCTAssertEqual(decoded.count, fields.count)
        for (name, value) in fields { XCTAssertEqual(decoded[name], value, name) }
    }
}
