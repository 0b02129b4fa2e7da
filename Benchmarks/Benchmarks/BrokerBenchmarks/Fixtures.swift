import BrokerCache
import BrokerCore
import BrokerJSON
import BrokerProtocol
import BrokerServer
import BrokerWire
import Foundation
import Logging

/// Synthetic caches shaped like what brokerd holds: per account one Account entry, one IdToken (a JWT whose
/// claims the token answer carries), one RefreshToken and `tokensPerAccount` AccessTokens with 1.5 KB secrets, each
/// for its own resource, all of one client in the Microsoft cloud, realm = the account's home tenant.
enum Fixture {
    static let clientId = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
    static let environment = "login.microsoftonline.com"
    static let tokensPerAccount = 10
    static let secretLength = 1_536

    /// The same clock as the broker's, so that generated tokens are valid for the lookups (a day left).
    static let now = SystemClock().now()

    /// A deterministic GUID (lower-case, 8-4-4-4-12) for `n` in the namespace `salt`.
    static func guid(_ n: Int, salt: UInt64) -> String {
        func mix(_ x: UInt64) -> UInt64 {  // splitmix64
            var z = x &+ 0x9E37_79B9_7F4A_7C15
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        func hex(_ v: UInt64) -> String {
            let s = String(v, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }
        let h = Array(hex(mix(UInt64(n) &* 2 &+ salt)) + hex(mix(UInt64(n) &* 2 &+ 1 &+ salt)))
        return [String(h[0..<8]), String(h[8..<12]), String(h[12..<16]), String(h[16..<20]), String(h[20..<32])]
            .joined(separator: "-")
    }

    struct Account {
        var uid: String
        var tenant: String
        var homeAccountId: String { "\(uid).\(tenant)" }
        var username: String
    }

    static func account(_ i: Int) -> Account {
        Account(uid: guid(i, salt: 0x51D), tenant: guid(i, salt: 0x7E4A47), username: "user\(i)@tenant\(i).example")
    }

    static func scope(_ t: Int) -> String { "api://resource-\(t)/read" }

    /// base64url-looking text for a secret (the content does not matter; the length does).
    private static let secretBody: String = {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var state: UInt64 = 0x1234_5678
        return String((0..<secretLength).map { _ -> Character in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return alphabet[Int(state >> 58)]
        })
    }()

    /// A distinct 1.5 KB secret per (account, token).
    static func secret(_ i: Int, _ t: Int) -> String {
        let prefix = "eyJ0eXAiOiJKV1Qi.\(i).\(t)."
        return prefix + secretBody.dropFirst(prefix.count)
    }

    static func idToken(for a: Account) -> String {
        let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"RS256","kid":"bench"}"#.utf8))
        let claims = JSONWriter().bytes(.object(JSONObject([
            "aud": .string(clientId),
            "iss": .string("https://login.microsoftonline.com/\(a.tenant)/v2.0"),
            "iat": .int(now), "nbf": .int(now), "exp": .int(now + 3_600),
            "name": .string("Bench User"), "oid": .string(a.uid), "preferred_username": .string(a.username),
            "sub": .string("sub-\(a.uid)"), "tid": .string(a.tenant), "ver": .string("2.0"),
        ])))
        return header + "." + Base64URL.encode(claims) + "." + Base64URL.encode(Array(repeating: 0x5A, count: 256))
    }

    static func entity(_ pairs: [(String, String)]) -> CacheEntity {
        CacheEntity(fields: JSONObject(pairs.map { JSONObject.Member(key: $0.0, value: .string($0.1)) }))
    }

    static func accessToken(_ a: Account, index i: Int, token t: Int) -> CacheEntity {
        entity([
            ("home_account_id", a.homeAccountId), ("environment", environment), ("credential_type", "AccessToken"),
            ("client_id", clientId), ("secret", secret(i, t)), ("realm", a.tenant), ("target", scope(t)),
            ("cached_at", String(now)), ("expires_on", String(now + 86_400)), ("extended_expires_on", String(now + 86_400)),
            ("token_type", "Bearer"),
        ])
    }

    /// A cache of `accounts` accounts. With `accessTokensOnly`, just the access tokens (the persistence benchmark).
    static func cache(accounts: Int, accessTokensOnly: Bool = false) -> TokenCache {
        var cache = TokenCache()
        for i in 0..<accounts {
            let a = account(i)
            for t in 0..<tokensPerAccount { cache.add(.accessToken, accessToken(a, index: i, token: t)) }
            if accessTokensOnly { continue }
            cache.add(.account, entity([
                ("home_account_id", a.homeAccountId), ("environment", environment), ("realm", a.tenant),
                ("local_account_id", a.uid), ("username", a.username), ("authority_type", "MSSTS"),
                ("name", "Bench User"),
                ("client_info", Base64URL.encode(Array(#"{"uid":"\#(a.uid)","utid":"\#(a.tenant)"}"#.utf8))),
            ]))
            cache.add(.idToken, entity([
                ("home_account_id", a.homeAccountId), ("environment", environment), ("credential_type", "IdToken"),
                ("client_id", clientId), ("realm", a.tenant), ("secret", idToken(for: a)),
            ]))
            cache.add(.refreshToken, entity([
                ("home_account_id", a.homeAccountId), ("environment", environment), ("credential_type", "RefreshToken"),
                ("client_id", clientId), ("secret", "1.Rt" + secret(i, -1).dropFirst(4)), ("family_id", "1"),
                ("last_modification_time", String(now)),
            ]))
        }
        _ = cache.takeChangedRows()
        return cache
    }

    /// The account the lookups ask for: one in the middle of the cache.
    static func probe(accounts: Int) -> (account: Account, index: Int) {
        let i = accounts / 2
        return (account(i), i)
    }

    static func silentRequest(for a: Account, token t: Int = 3) -> SilentTokenRequest {
        SilentTokenRequest(clientId: clientId, authority: "https://login.microsoftonline.com/\(a.tenant)",
                           scopes: [scope(t)], account: .homeAccountId(a.homeAccountId))
    }

    static let quietLogger = Logger(label: "brokerd.benchmarks", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A fresh private directory under the system temp dir (on this machine /tmp is on the root disk, so fsync is real).
    static func temporaryDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/brokerd-bench-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw BenchmarkSetupError("mkdtemp failed")
        }
        return String(cString: made)
    }
}

struct BenchmarkSetupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The socket front end's own translations (BrokerServer's SocketWire), not copies of them.
func wire(_ summary: AccountSummary) -> BrokerProtocol.Account { SocketWire.account(summary) }

/// How the socket front end has the broker write a hit's account (RequestRouter.cachedAnswer).
let socketAccountText: @Sendable (AccountSummary) -> [UInt8]? = SocketWire.accountText
