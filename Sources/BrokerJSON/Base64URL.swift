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
        decode(utf8: text.utf8)
    }

    /// The same, from the text's UTF-8 bytes.
    public static func decode<Bytes: Collection<UInt8>>(utf8 text: Bytes) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.count * 3 / 4)
        var bits: UInt32 = 0, pending = 0, padding = 0
        for byte in text {
            if byte == UInt8(ascii: "=") {
                padding += 1
                continue
            }
            // Nothing but more padding may follow padding.
            let value = values[Int(byte)]
            guard padding == 0, value != 0xFF else { return nil }
            bits = bits << 6 | UInt32(value)
            pending += 1
            if pending == 4 {
                out.append(UInt8(truncatingIfNeeded: bits >> 16))
                out.append(UInt8(truncatingIfNeeded: bits >> 8))
                out.append(UInt8(truncatingIfNeeded: bits))
                bits = 0
                pending = 0
            }
        }
        guard padding <= 2 else { return nil }
        switch pending {
        case 1: return nil  // 6 bits are not a byte
        case 2: out.append(UInt8(truncatingIfNeeded: bits >> 4))
        case 3:
            out.append(UInt8(truncatingIfNeeded: bits >> 10))
            out.append(UInt8(truncatingIfNeeded: bits >> 2))
        default: break
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
        let utf8 = token.utf8
        guard let first = utf8.firstIndex(of: UInt8(ascii: ".")),
              let second = utf8[utf8.index(after: first)...].firstIndex(of: UInt8(ascii: ".")),
              !utf8[utf8.index(after: second)...].contains(UInt8(ascii: "."))
        else { throw .notAJWT }
        guard let bytes = Base64URL.decode(utf8: utf8[utf8.index(after: first)..<second]),
              case .object(let object)? = try? JSONReader.parse(bytes) else {
            throw .badPayload
        }
        return object
    }
}
