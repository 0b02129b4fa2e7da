import XCTest
@testable import BrokerCache
@testable import BrokerJSON
@testable import BrokerCore
@testable import OAuth

final class ScopesTests: XCTestCase {
    func testRequestedDropsReservedAndDuplicatesKeepingOrder() {
        let input = ["User.Read", "openid", "OPENID", "Profile", "offline_access", "Offline_Access", "user.read",
                     "Mail.Read", " Mail.Send ", "", "   ", "MAIL.READ", "https://management.core.windows.net//.default"]
        XCTAssertEqual(Scopes.requested(input),
                       ["User.Read", "Mail.Read", "Mail.Send", "https://management.core.windows.net//.default"])
    }

    /// Past 16 scopes the duplicates are found with a set instead of a list: both give the same answer, and a
    /// scope with Unicode spaces around it is trimmed as one with ASCII spaces is.
    func testRequestedGivesTheSameAnswerForManyScopes() {
        let few = ["User.Read", "\u{00A0}Mail.Read\u{2003}", "user.read", "\tFiles.Read ", "OpenID", "mail.READ"]
        XCTAssertEqual(Scopes.requested(few), ["User.Read", "Mail.Read", "Files.Read"])
        let many = few + (0..<20).map { "Scope.\($0 % 7)" } + ["FILES.read", "scope.3"]
        XCTAssertEqual(Scopes.requested(many), ["User.Read", "Mail.Read", "Files.Read"] + (0..<7).map { "Scope.\($0)" })
    }

    /// The index numbers a string by its lowercase form; a mixed-case form is kept as another name of that number, so
    /// that meeting it again needs no lowering. Every form gives the one number, in either order of first meeting.
    func testEveryCaseOfAStringHasTheNumberOfItsLowercaseForm() {
        var table = StringTable()
        let read = table.intern("User.Read")
        XCTAssertEqual(table.intern("user.read"), read)
        XCTAssertEqual(table.intern("USER.READ"), read)
        XCTAssertEqual(table.number(of: "uSeR.rEaD"), read)
        XCTAssertEqual(table[read], "user.read")
        let mail = table.intern("mail.read")
        XCTAssertNotEqual(mail, read)
        XCTAssertEqual(table.intern("Mail.Read"), mail)
        XCTAssertEqual(table.number(of: "MAIL.READ"), mail)
        XCTAssertNil(table.number(of: "Files.Read"))
        XCTAssertNil(table.number(of: "files.read"))
        XCTAssertEqual(table.intern("İstanbul"), table.intern("İstanbul".lowercased()))
    }

    /// The checks that hash only a string of a listed name's length agree with the sets, in every case.
    func testReservedScopesAndTenantAliasesAreFoundByTheirLength() {
        for name in Scopes.reserved {
            XCTAssertTrue(Scopes.isReserved(name), name)
            XCTAssertFalse(Scopes.isReserved(name + "x"), name)
        }
        XCTAssertFalse(Scopes.isReserved("https://graph.microsoft.com/user.read"))
        for name in TokenCache.tenantAliases {
            XCTAssertTrue(TokenCache.isTenantAlias(name), name)
            XCTAssertTrue(TokenCache.isTenantAlias(name.uppercased()), name)
            XCTAssertFalse(TokenCache.isTenantAlias(String(name.dropLast()) + "x"), name)
        }
        XCTAssertFalse(TokenCache.isTenantAlias("c06a47ab-4fa5-4394-be5b-cdcf77d28c4b"))
        XCTAssertFalse(TokenCache.isTenantAlias(""))
    }

    /// The tables a hit looks strings up in hash them by `ByteDigest`: every byte, the tail's included, moves it.
    func testByteDigestTakesEveryByte() {
        for length in 0..<40 {
            let text = Array(repeating: UInt8(ascii: "a"), count: length)
            let digest = text.withUnsafeBytes(ByteDigest.of)
            XCTAssertEqual(ByteDigest.of(String(decoding: text, as: UTF8.self)), digest)
            XCTAssertNotEqual((text + [0]).withUnsafeBytes(ByteDigest.of), digest, "length \(length)")
            for position in 0..<length {
                var changed = text
                changed[position] = UInt8(ascii: "b")
                XCTAssertNotEqual(changed.withUnsafeBytes(ByteDigest.of), digest, "length \(length), byte \(position)")
            }
        }
    }

    /// A digest's last bytes are read as one word, loaded from the end of the buffer when it has eight: the word
    /// holds those bytes in order, low byte first, and nothing of the bytes before them.
    func testByteDigestTailIsTheLastBytesInOrder() {
        for length in 0..<20 {
            let bytes = (0..<length).map { UInt8(0x41 + $0) }
            for start in max(0, length - 7)..<length {
                let word = bytes.withUnsafeBytes { ByteDigest.tail(of: $0, from: start) }
                var expected: UInt64 = 0
                for (shift, byte) in bytes[start...].enumerated() { expected |= UInt64(byte) << (8 * UInt64(shift)) }
                XCTAssertEqual(word, expected, "length \(length), from \(start)")
            }
        }
    }

    /// A use's key is the name of its row in the database: a new way of writing it must write what was written.
    func testTokenUseKeyKeepsItsFormat() {
        let use = TokenUse(clientId: "Client-A", homeAccountId: "UID.utid", authority: "https://Login.example/T",
                           scopes: ["b.Read", "A.read", "c"], lastUsed: 1)
        XCTAssertEqual(use.key, "client-a uid.utid https://login.example/t a.read b.read c")
        XCTAssertEqual(TokenUse(clientId: "c", homeAccountId: "h", authority: "a", scopes: [], lastUsed: 1).key, "c h a")
        // Written byte by byte: the same key as the fields lowercased and joined, for ASCII and for any other text.
        let parts = ["", "A", "Zz@[`{", "ÀÉÎ", "İstanbul", "straße", "ΣΑΣ", "User.Read", "x y"]
        for client in parts {
            for scopes in [[], [parts.randomElement()!], [parts.randomElement()!, parts.randomElement()!, "M"]] {
                let use = TokenUse(clientId: client, homeAccountId: parts.randomElement()!, authority: parts.randomElement()!,
                                   scopes: scopes, lastUsed: 1)
                let joined = ([use.clientId, use.homeAccountId, use.authority].map { $0.lowercased() }
                    + use.scopes.map { $0.lowercased() }.sorted()).joined(separator: " ")
                XCTAssertEqual(use.key, joined)
            }
        }
    }

    /// A hit finds whether its use was noted by the use's digest (`TokenCache.isNoted`): uses of one key must have one
    /// digest, whatever their case and scope order, and uses of different keys should not.
    func testTokenUseDigestFollowsTheKey() {
        for byte in UInt8(0)...UInt8(255) {
            let lowered = ASCIIWord.lowered(UInt64(byte) << 24 | 0x4142_7A00_005B_4060)
            let expected = (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte)
            XCTAssertEqual(UInt8(truncatingIfNeeded: lowered >> 24), expected, "byte \(byte)")
            XCTAssertEqual(lowered & ~(0xFF << 24), 0x6162_7A00_005B_4060, "the other bytes, beside \(byte)")
            // Every length and place: `lowercasedIfNeeded` copies exactly when `lowercased()` changes the text.
            for length in 1...19 {
                for place in 0..<length {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[place] = byte
                    guard let text = String(validating: bytes, as: UTF8.self) else { continue }
                    XCTAssertEqual(bytes.withUnsafeBytes(ASCIIWord.needsLowering), text.lowercased() != text || byte >= 0x80,
                                   "byte \(byte) at \(place) of \(length)")
                    XCTAssertEqual(text.lowercasedIfNeeded, text.lowercased())
                }
            }
        }
        let parts = ["", "A", "a", "Zz@[`{", "ÀÉÎ", "àéî", "İstanbul", "straße", "ΣΑΣ", "User.Read", "user.read",
                     "https://Graph.Microsoft.com/User.Read.All", "x y", "x", "y"]
        // What `key` says, with its parts apart (the key joins them with spaces, so "x y" + "" and "x" + "y" share
        // a key; the digest tells them apart, which only makes a hit hand its use over once more).
        func normalized(_ use: TokenUse) -> [String] {
            [use.clientId, use.homeAccountId, use.authority].map { $0.lowercased() } + use.scopes.map { $0.lowercased() }.sorted()
        }
        var digestOfParts: [[String]: UInt64] = [:], partsOfDigest: [UInt64: [String]] = [:]
        for _ in 0..<2_000 {
            let use = TokenUse(clientId: parts.randomElement()!, homeAccountId: parts.randomElement()!,
                               authority: parts.randomElement()!,
                               scopes: (0..<Int.random(in: 0...3)).map { _ in parts.randomElement()! }, lastUsed: 1)
            var shuffled = use
            shuffled.scopes.shuffle()
            shuffled.clientId = Bool.random() ? use.clientId.uppercased() : use.clientId.lowercased()
            if normalized(shuffled) == normalized(use) { XCTAssertEqual(use.digest, shuffled.digest, "\(use.key)") }
            if let seen = digestOfParts[normalized(use)] { XCTAssertEqual(seen, use.digest) }
            digestOfParts[normalized(use)] = use.digest
            if let other = partsOfDigest[use.digest] { XCTAssertEqual(other, normalized(use), "two uses, one digest") }
            partsOfDigest[use.digest] = normalized(use)
        }
        XCTAssertGreaterThan(partsOfDigest.count, 500)
    }

    /// One scope takes a path of its own (no list to compare with): the same rules.
    func testOneRequestedScopeFollowsTheSameRules() {
        for scope in ["User.Read", " User.Read ", "\tuser.read", "OpenID", "offline_access", " PROFILE", "", "  ",
                      "https://graph.microsoft.com/.default", "ÀÉÎ.read", "Offline_Access", "offline_\u{212A}ccess"] {
            XCTAssertEqual(Scopes.requested([scope]), Scopes.requested([scope, scope]), "'\(scope)'")
        }
        XCTAssertEqual(Scopes.requested([" User.Read "]), ["User.Read"])
        XCTAssertEqual(Scopes.requested(["OFFLINE_ACCESS"]), [])
    }

    /// Whether a scope is reserved, case aside, checked by its length before it is lowered: the same answer as
    /// lowering it first, for every case of the reserved names and for scopes of their lengths that are not them.
    func testAReservedScopeIsFoundInAnyCaseWithoutLoweringTheRest() {
        for name in Scopes.reserved {
            for variant in [name, name.uppercased(), name.prefix(1).uppercased() + name.dropFirst()] {
                XCTAssertTrue(Scopes.isReserved(ignoringCase: variant), variant)
            }
        }
        for scope in ["openix", "profil", "PROFILES", "offline_acces", "https://graph.microsoft.com/User.Read", "",
                      "\u{212A}", "ÖPENID", "offline_\u{212A}ccess"] {
            XCTAssertEqual(Scopes.isReserved(ignoringCase: scope), Scopes.isReserved(scope.lowercased()), scope)
        }
    }

    /// A home account id's tenant half, by bytes, as `split(separator: ".").last` gives it.
    func testTheLastDotComponentIsTheLastPartSplitGives() {
        for text in ["uid.utid", "a.b.c", "nodot", "", ".", "...", "trailing.", "trailing..", ".leading", "a..b", "é.ü"] {
            XCTAssertEqual(TokenCache.lastDotComponent(text), text.split(separator: ".").last.map(String.init), text)
        }
    }

    /// A target's scopes split by bytes as a split at spaces and tabs gives them.
    func testATargetSplitsAtSpacesAndTabs() {
        for text in ["a b", " a  b ", "\ta\tb\t", "", "   ", "one", "é ü\tß", "User.Read Mail.Read"] {
            XCTAssertEqual(CacheEntity.words(text), text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init),
                           text)
        }
    }

    func testRequestedKeepsDefaultScopesAsWritten() {
        XCTAssertEqual(Scopes.requested(["https://management.core.windows.net//.default"]),
                       ["https://management.core.windows.net//.default"])
        XCTAssertEqual(Scopes.requested(["https://graph.microsoft.com/.default"]), ["https://graph.microsoft.com/.default"])
        XCTAssertEqual(Scopes.requested(["api://fake-app-id/Access.As.User"]), ["api://fake-app-id/Access.As.User"],
                       "case of a non-reserved scope is kept")
        XCTAssertEqual(Scopes.requested([]), [])
        XCTAssertEqual(Scopes.requested(["openid", "profile", "offline_access"]), [])
    }

    func testOnTheWireAddsOIDCScopesSorted() {
        XCTAssertEqual(Scopes.onTheWire(["User.Read"]), ["User.Read", "offline_access", "openid", "profile"])
        XCTAssertEqual(Scopes.onTheWire([]), ["offline_access", "openid", "profile"])
        XCTAssertEqual(Scopes.onTheWire(["OpenID", "Profile", "mail.read", "User.Read", "user.read"]),
                       ["User.Read", "mail.read", "offline_access", "openid", "profile"])
        XCTAssertEqual(Scopes.onTheWire(["https://management.core.windows.net//.default"]),
                       ["https://management.core.windows.net//.default", "offline_access", "openid", "profile"])
    }

    func testDeclined() {
        XCTAssertEqual(Scopes.declined(requested: ["User.Read", "Mail.Read"], granted: ["user.read", "openid", "profile"]),
                       ["Mail.Read"])
        XCTAssertEqual(Scopes.declined(requested: ["User.Read", "email"], granted: ["User.Read"]), [],
                       "email counts as granted when not echoed")
        XCTAssertEqual(Scopes.declined(requested: ["EMAIL"], granted: []), [], "the email exception is case-insensitive")
        XCTAssertEqual(Scopes.declined(requested: ["MAIL.READ"], granted: ["Mail.Read"]), [])
        XCTAssertEqual(Scopes.declined(requested: [], granted: ["User.Read"]), [])
        XCTAssertEqual(Scopes.declined(requested: ["A", "B"], granted: []), ["A", "B"])
    }

    func testSplit() {
        XCTAssertEqual(Scopes.split("openid  profile\tUser.Read "), ["openid", "profile", "User.Read"])
        XCTAssertEqual(Scopes.split(""), [])
        XCTAssertEqual(Scopes.split("https://management.core.windows.net//.default"),
                       ["https://management.core.windows.net//.default"])
    }
}

final class AuthorityTests: XCTestCase {
    func testEntraAuthority() throws {
        let authority = try XCTUnwrap(Authority("https://login.microsoftonline.com/common/"))
        XCTAssertEqual(authority.url, "https://login.microsoftonline.com/common")
        XCTAssertEqual(authority.environment, "login.microsoftonline.com")
        XCTAssertEqual(authority.tenant, "common")
    }

    func testLoopbackWithPortAndNoTenant() throws {
        let authority = try XCTUnwrap(Authority("http://127.0.0.1:8000"))
        XCTAssertEqual(authority.url, "http://127.0.0.1:8000")
        XCTAssertEqual(authority.environment, "127.0.0.1:8000")
        XCTAssertEqual(authority.tenant, "")
        XCTAssertEqual(Authority("http://127.0.0.1:8000/"), authority)
    }

    func testHostAndSchemeAreLowerCasedButTheTenantIsNot() throws {
        let authority = try XCTUnwrap(Authority("HTTPS://Login.MicrosoftOnline.COM/Contoso.onmicrosoft.com"))
        XCTAssertEqual(authority.url, "https://login.microsoftonline.com/Contoso.onmicrosoft.com")
        XCTAssertEqual(authority.environment, "login.microsoftonline.com")
        XCTAssertEqual(authority.tenant, "Contoso.onmicrosoft.com")
    }

    func testLongerPathsAndSpaces() throws {
        let authority = try XCTUnwrap(Authority("  https://idp.example:8443/fake-tenant/v2.0//  "))
        XCTAssertEqual(authority.url, "https://idp.example:8443/fake-tenant/v2.0")
        XCTAssertEqual(authority.environment, "idp.example:8443")
        XCTAssertEqual(authority.tenant, "fake-tenant")
        XCTAssertEqual(Authority("https://idp.example//fake-tenant")?.url, "https://idp.example/fake-tenant")
    }

    func testRejected() {
        for text in ["not a url", "", "ftp://x/y", "file:///etc/passwd", "login.microsoftonline.com/common",
                     "https://", "https:///common", "https://login.microsoftonline.com/common?x=1",
                     "https://login.microsoftonline.com/common#frag", "https://login.microsoftonline.com?x=1",
                     "https://user@login.microsoftonline.com/common", "https://user:pw@idp.example/t",
                     // What RFC 3986 does not allow is refused, not percent-encoded behind the caller's back.
                     "https://login.microsoftonline.com/con toso", "https://idp .example/t", "https://münchen.example/t",
                     "https://login.microsoftonline.com/common?", "https://login.microsoftonline.com/common#"] {
            XCTAssertNil(Authority(text), "\"\(text)\" must be rejected")
        }
    }

    func testIPv6HostAndAnEmptyPort() throws {
        let v6 = try XCTUnwrap(Authority("http://[::1]:8080/adfs"))
        XCTAssertEqual(v6.url, "http://[::1]:8080/adfs")
        XCTAssertEqual(v6.environment, "[::1]:8080")
        XCTAssertEqual(v6.host, "[::1]")
        XCTAssertEqual(v6.kind, .adfs)
        XCTAssertEqual(Authority("https://idp.example:/t")?.environment, "idp.example", "an empty port is no port")
        XCTAssertEqual(Authority("https://login.microsoftonline.com/con%20toso")?.tenant, "con%20toso", "kept as written")
    }
}

final class HTTPTransportCheckTests: XCTestCase {
    private func isAllowed(_ transport: HTTPTransport, _ url: String) -> Bool {
        do { try transport.check(url); return true } catch {
            XCTAssertEqual(kind(error), "configuration", "\(url): \(error)")
            return false
        }
    }

    func testStrictSettings() async throws {
        let transport = try HTTPTransport(settings: .init(allowLoopbackHTTP: false), clock: { 0 }, wallClock: { 0 })
        XCTAssertTrue(isAllowed(transport, "https://login.microsoftonline.com/common/oauth2/v2.0/token"))
        XCTAssertTrue(isAllowed(transport, "HTTPS://Login.Example.COM/x"))
        XCTAssertFalse(isAllowed(transport, "http://127.0.0.1:8080/token"))
        XCTAssertFalse(isAllowed(transport, "http://localhost/token"))
        XCTAssertFalse(isAllowed(transport, "http://[::1]:8080/token"))
        XCTAssertFalse(isAllowed(transport, "http://example.com/token"))
        XCTAssertFalse(isAllowed(transport, "ftp://example.com/token"))
        XCTAssertFalse(isAllowed(transport, "login.microsoftonline.com/common"))
        XCTAssertFalse(isAllowed(transport, ""))
        // An https URL must be one: a malformed one is refused before it reaches the HTTP client.
        XCTAssertFalse(isAllowed(transport, "https://"))
        XCTAssertFalse(isAllowed(transport, "https://idp .example/token"))
        XCTAssertTrue(isAllowed(transport, "https://idp.example/b2c/oauth2/v2.0/token?p=b2c_1_signin"), "a query is fine")
        await transport.shutdown()
    }

    func testLoopbackAllowed() async throws {
        let transport = try HTTPTransport(settings: .init(allowLoopbackHTTP: true), clock: { 0 }, wallClock: { 0 })
        XCTAssertTrue(isAllowed(transport, "https://login.microsoftonline.com/common"))
        XCTAssertTrue(isAllowed(transport, "http://127.0.0.1:8080/token"))
        XCTAssertTrue(isAllowed(transport, "http://127.0.0.1/token"))
        XCTAssertTrue(isAllowed(transport, "http://localhost/token"))
        XCTAssertTrue(isAllowed(transport, "http://LOCALHOST:9000"))
        XCTAssertTrue(isAllowed(transport, "http://[::1]:8080/token"))
        // Never other plain-HTTP hosts, including look-alikes of loopback names.
        XCTAssertFalse(isAllowed(transport, "http://example.com/token"))
        XCTAssertFalse(isAllowed(transport, "http://localhost.example.com/token"))
        XCTAssertFalse(isAllowed(transport, "http://127.0.0.1.example.com/token"))
        XCTAssertFalse(isAllowed(transport, "http://127.0.0.1@example.com/token"))
        XCTAssertFalse(isAllowed(transport, "http://localhost:80@example.com/"))
        XCTAssertFalse(isAllowed(transport, "http://10.0.0.1/token"))
        XCTAssertFalse(isAllowed(transport, "ftp://127.0.0.1/token"))
        XCTAssertFalse(isAllowed(transport, "ws://localhost/token"))
        await transport.shutdown()
    }

    func testHostOf() {
        XCTAssertEqual(HTTPTransport.host(of: "https://Login.Example.COM:443/path?q=1"), "login.example.com")
        XCTAssertEqual(HTTPTransport.host(of: "https://login.example.com"), "login.example.com")
        XCTAssertEqual(HTTPTransport.host(of: "https://login.example.com?x=1"), "login.example.com")
        XCTAssertEqual(HTTPTransport.host(of: "https://login.example.com#frag"), "login.example.com")
        XCTAssertEqual(HTTPTransport.host(of: "http://127.0.0.1:8080/x"), "127.0.0.1")
        XCTAssertEqual(HTTPTransport.host(of: "http://[::1]:8080/x"), "[::1]")
        XCTAssertEqual(HTTPTransport.host(of: "http://[FE80::1]/x"), "[fe80::1]")
        XCTAssertEqual(HTTPTransport.host(of: "https://user:pw@host.example:8443/x"), "host.example")
        XCTAssertNil(HTTPTransport.host(of: "https://a@b@host.example/x"), "RFC 3986: no second @ in the authority")
        XCTAssertNil(HTTPTransport.host(of: "login.example.com/path"))
        XCTAssertNil(HTTPTransport.host(of: "https://"))
        XCTAssertNil(HTTPTransport.host(of: "https:///path"))
    }
}
