/// base64url (RFC 4648 §5) without padding, as JWTs, PKCE and client_info use it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    /// Each byte's value, 0xFF for a byte outside the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        table[Int(UInt8(ascii: "+"))] = 62  // plain base64 too: client_info is sometimes padded standard base64
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()

    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        encode(Array(bytes), into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the encoding of `input` to `out` (ASCII, nothing JSON escapes): an answer writes a client_info into
    /// its own buffer this way, where a String was made and copied in.
    public static func encode(_ input: [UInt8], into out: inout [UInt8]) {
        out.reserveCapacity(out.count + (input.count * 4 + 2) / 3)
        var index = 0
        while index < input.count {
            let b0 = input[index], b1 = index + 1 < input.count ? input[index + 1] : 0
            let b2 = index + 2 < input.count ? input[index + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            if index + 1 < input.count { out.append(alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)]) }
            if index + 2 < input.count { out.append(alphabet[Int(b2 & 0x3F)]) }
            index += 3
        }
    }

    /// Decodes base64url or base64, padded or not; nil for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(utf8: text.utf8)
    }

    /// The same, from the text's UTF-8 bytes.
    public static func decode<Bytes: Collection<UInt8>>(utf8 text: Bytes) -> [UInt8]? {
        if let decoded = text.withContiguousStorageIfAvailable(decode(contiguous:)) { return decoded }
        return Array(text).withUnsafeBufferPointer(decode(contiguous:))
    }

    /// Four characters at a time (a token's payload is a kilobyte or more). Padding may only end the text.
    private static func decode(contiguous text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var end = text.count, padding = 0
        while end > 0, text[end - 1] == UInt8(ascii: "=") {
            end -= 1
            padding += 1
        }
        let (quads, rest) = end.quotientAndRemainder(dividingBy: 4)
        // 6 bits are not a byte.
        guard padding <= 2, rest != 1 else { return nil }
        let count = quads * 3 + max(rest - 1, 0)
        return values.withUnsafeBufferPointer { table -> [UInt8]? in
            func value(_ index: Int) -> UInt32 { UInt32(table[Int(text[index])]) }
            var valid = true
            let out = [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
                var input = 0, output = 0
                for _ in 0..<quads {
                    let (a, b, c, d) = (value(input), value(input + 1), value(input + 2), value(input + 3))
                    // A byte outside the alphabet is 0xFF: the only value with its high bit set.
                    if (a | b | c | d) & 0x80 != 0 { valid = false; break }
                    let bits = a << 18 | b << 12 | c << 6 | d
                    out[output] = UInt8(truncatingIfNeeded: bits >> 16)
                    out[output + 1] = UInt8(truncatingIfNeeded: bits >> 8)
                    out[output + 2] = UInt8(truncatingIfNeeded: bits)
                    input += 4
                    output += 3
                }
                if valid, rest > 0 {
                    let a = value(input), b = value(input + 1), c = rest == 3 ? value(input + 2) : 0
                    if (a | b | c) & 0x80 != 0 {
                        valid = false
                    } else {
                        let bits = a << 18 | b << 12 | c << 6
                        out[output] = UInt8(truncatingIfNeeded: bits >> 16)
                        if rest == 3 { out[output + 1] = UInt8(truncatingIfNeeded: bits >> 8) }
                    }
                }
                initialized = valid ? count : 0
            }
            return valid ? out : nil
        }
    }
}

/// The claims of a JWT's payload. The signature is not checked here: id_tokens come straight from the token
/// endpoint over TLS (OIDC Core §3.1.3.7 allows relying on TLS server validation in that case).
public enum JWTPayload {
    public enum Failure: Error, CustomStringConvertible, Equatable {
        case notAJWT
        case badPayload
        public var description: String {
            switch self {
            case .notAJWT: return "not a JWT (expected three base64url parts)"
            case .badPayload: return "the JWT payload is not a base64url JSON object"
            }
        }
    }

    public static func claims(of token: String) throws(Failure) -> JSONObject {
        let bytes = try payload(of: token)
        guard case .object(let object)? = try? JSONReader.parse(bytes) else { throw .badPayload }
        return object
    }

    /// The claims as `JSONWriter.writeCanonicalWire` writes `claims(of:)`: from the payload's bytes when they allow it
    /// (`CanonicalJSONText`), else through the tree. An account's first answer writes them.
    public static func canonicalClaims(of token: String) throws(Failure) -> [UInt8] {
        let bytes = try payload(of: token)
        if let text = CanonicalJSONText.of(bytes) {
            guard text.first == UInt8(ascii: "{") else { throw .badPayload }
            return text
        }
        guard case .object(let object)? = try? JSONReader.parse(bytes) else { throw .badPayload }
        var text: [UInt8] = []
        // Claims the canonical writer cannot write count as a payload that is not JSON (no literal JSONReader reads
        // makes it throw: 1e400 is written too).
        do { try JSONWriter.writeCanonicalWire(.object(object), into: &text) } catch { throw .badPayload }
        return text
    }

    /// One claim, when it is a string, without the rest of the payload being kept: what `claims(of:)` then
    /// `stringValue` give (nil for a token that is not a JWT, a payload that is not an object, or no such string).
    public static func stringClaim(_ name: String, of token: String) -> String? {
        guard let payload = try? payload(of: token) else { return nil }
        var reader = JSONReader(payload)
        var claim: String?
        do {
            guard try reader.peekKind() == .object else { return nil }
            try reader.readMembers([name]) { (_, reader) throws(JSONReadError) in
                if try reader.peekKind() == .string { claim = try reader.readString() } else { try reader.skipValue() }
            }
            try reader.expectEnd()
        } catch JSONReader.repeatedMember {
            // The first of a claim given twice, as `claims(of:)` reads it.
            return (try? claims(of: token))?[name]?.stringValue
        } catch {
            return nil
        }
        return claim
    }

    /// The payload's bytes, decoded: the second of three base64url parts.
    private static func payload(of token: String) throws(Failure) -> [UInt8] {
        var token = token, isJWT = false
        let decoded = token.withUTF8 { text -> [UInt8]? in
            guard let first = text.firstIndex(of: UInt8(ascii: ".")),
                  let second = text[(first + 1)...].firstIndex(of: UInt8(ascii: ".")),
                  !text[(second + 1)...].contains(UInt8(ascii: ".")) else { return nil }
            isJWT = true
            return Base64URL.decode(utf8: UnsafeBufferPointer(rebasing: text[(first + 1)..<second]))
        }
        guard isJWT else { throw .notAJWT }
        guard let bytes = decoded else { throw .badPayload }
        return bytes
    }
}
