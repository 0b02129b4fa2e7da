import BrokerJSON
import OAuthParsing

/// An id_token and client_info from a token response: decoding any text ends in claims or a failure, validation
/// answers yes or no (never traps, whatever numbers `exp` and `iat` hold), base64url decoding inverts encoding, and
/// the claims' canonical text (`JWTPayload.canonicalClaims`) is what the claims are written as.
/// The input is tried as a whole token and, since a fuzzer rarely finds valid base64 JSON by itself, as the payload.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIdToken(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    for raw in [text, "eyJhbGciOiJub25lIn0." + Base64URL.encode(bytes) + ".c2ln"] {
        guard let token = try? IdToken(raw: raw) else { continue }
        _ = (token.issuer, token.subject, token.objectId, token.tenantId, token.username, token.name, token.audiences)
        for issuer in ["https://idp.example/tenant", "https://login.example/{tenantid}/v2.0"] {
            for now: Int64 in [0, 1_700_000_000] {
                try? token.validate(issuer: issuer, clientId: "fuzz-client", nonce: "fuzz-nonce", now: now)
                try? token.validate(issuer: issuer, clientId: "fuzz-client", nonce: nil, now: now)
            }
        }
    }
    if let info = ClientInfo(encoded: text) { _ = info.homeAccountId }
    if let decoded = Base64URL.decode(text) {
        require(Base64URL.decode(Base64URL.encode(decoded)) == decoded, "base64url does not round-trip")
    }
    for raw in [text, "eyJhbGciOiJub25lIn0." + Base64URL.encode(bytes) + ".c2ln"] {
        // The claims an account's answer writes: the canonical text of the claims, or a failure where they fail.
        let claims = try? JWTPayload.claims(of: raw), canonical = try? JWTPayload.canonicalClaims(of: raw)
        require((claims == nil) == (canonical == nil), "canonicalClaims and claims disagree on a token")
        if let claims, let canonical {
            var written: [UInt8] = []
            try? JSONWriter.writeCanonicalWire(.object(claims), into: &written)
            require(written == canonical, "canonicalClaims is not the claims written canonically")
        }
    }
    return 0
}

/// A broken invariant, reported with its message (a release build's `precondition` traps without one).
private func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
