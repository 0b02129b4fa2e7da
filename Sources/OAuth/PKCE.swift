import BrokerJSON
import Crypto

/// Proof Key for Code Exchange (RFC 7636), S256 only, and the random `state` / `nonce` values of a sign-in.
public struct PKCE: Sendable {
    public let verifier: String
    public let challenge: String
    public var method: String { "S256" }

    public init() {
        self.init(verifier: Self.randomToken(bytes: 32))
    }

    public init(verifier: String) {
        self.verifier = verifier
        challenge = Base64URL.encode(SHA256.hash(data: Array(verifier.utf8)))
    }

    /// `bytes` random bytes from the system generator, base64url-encoded (32 bytes give 43 characters).
    public static func randomToken(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}
