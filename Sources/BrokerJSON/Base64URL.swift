/// base64url (RFC 4648 §5) without padding, as JWTs, PKCE and client_info use it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8: UInt8] = {
        var map: [UInt8: UInt8] = [:]
        for (index, byte) in alphabet.enumerated() { map[byte] = UInt8(index) }
        map[UInt8(ascii: "+")] = 62  // plain base64 too: client_info is sometimes padded standard base64
        map[UInt8(ascii: "/")] = 63
        return map
    }()

    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let input = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity((input.count * 4 + 2) / 3)
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
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base64url or base64, padded or not; nil for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var sextets: [UInt8] = []
        var padding = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: "=") {
                padding += 1
                continue
            }
            // Nothing but more padding may follow padding.
            guard padding == 0, let value = values[byte] else { return nil }
            sextets.append(value)
        }
        if padding > 2 { return nil }
        if sextets.count % 4 == 1 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(sextets.count * 3 / 4)
        var index = 0
        while index < sextets.count {
            let chunk = sextets[index..<min(index + 4, sextets.count)].map { $0 }
            out.append(chunk[0] << 2 | chunk[1] >> 4)
            if chunk.count > 2 { out.append(chunk[1] << 4 | chunk[2] >> 2) }
            if chunk.count > 3 { out.append(chunk[2] << 6 | chunk[3]) }
            index += 4
        }
        return out
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
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .notAJWT }
        guard let bytes = Base64URL.decode(parts[1]), case .object(let object)? = try? JSONReader.parse(bytes) else {
            throw .badPayload
        }
        return object
    }
}
