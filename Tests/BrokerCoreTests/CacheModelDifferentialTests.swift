import BrokerCache
import BrokerJSON
import Foundation
import XCTest

/// The typed access-token index and the memoized account summaries against the lookups they replaced, on random
/// caches changed at random: every answer must be the one the field-by-field scan of the JSON entries gives.
final class CacheModelDifferentialTests: XCTestCase {
    /// A seeded generator, so that a failure can be replayed from its seed.
    private struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    private let accounts = ["uid1.utid1", "UID2.UTID1", "uid3.utid2", "uid4.Utid2"]
    private let clients = ["client-a", "CLIENT-B", "client-c"]
    private let environments = ["login.microsoftonline.com", "login.windows.net", "Login.Microsoft.com",
                                "login.microsoftonline.us", "idp.example"]
    private let realms = ["utid1", "UTID2", "other-tenant", ""]
    private let scopes = ["User.Read", "user.read", "Mail.Read", "Files.ReadWrite", "https://graph.microsoft.com/.default",
                          "api://x/Straße", "api://x/STRASSE", "openid"]
    private let now: Int64 = 1_000_000

    private func randomCase(_ text: String, _ rng: inout SplitMix) -> String {
        switch rng.next() % 4 {
        case 0: return text.uppercased()
        case 1: return text.lowercased()
        default: return text
        }
    }

    private func randomAccessToken(_ rng: inout SplitMix) -> CacheEntity {
        var entity = accessToken(hid: randomCase(accounts.randomElement(using: &rng)!, &rng),
                                 env: environments.randomElement(using: &rng)!,
                                 client: randomCase(clients.randomElement(using: &rng)!, &rng),
                                 realm: realms.randomElement(using: &rng)!, target: "", secret: "fake-\(rng.next() % 1000)")
        let count = Int(rng.next() % 4)
        let target = (0..<count).map { _ in randomCase(scopes.randomElement(using: &rng)!, &rng) }
        switch rng.next() % 3 {
        case 0: entity.fields["target"] = .array(target.map(JSONValue.string))
        case 1: entity.set("target", target.joined(separator: "\t "))
        default: entity.set("target", target.joined(separator: " "))
        }
        switch rng.next() % 6 {
        case 0: entity.fields["expires_on"] = nil
        case 1: entity.fields["expires_on"] = .number(String(now + Int64(rng.next() % 7200)))
        case 2: entity.set("expires_on", "not a number")
        default: entity.set("expires_on", String(now - 600 + Int64(rng.next() % 7200)))
        }
        if rng.next() % 10 == 0 { entity.fields["home_account_id"] = nil }
        if rng.next() % 10 == 0 { entity.fields["client_id"] = nil }
        return entity
    }

    private func randomOtherEntity(_ rng: inout SplitMix) -> (CredentialKind, CacheEntity) {
        let hid = accounts.randomElement(using: &rng)!, client = clients.randomElement(using: &rng)!
        let env = environments.randomElement(using: &rng)!, realm = realms.randomElement(using: &rng)!
        switch rng.next() % 3 {
        case 0: return (.account, accountEntry(hid: randomCase(hid, &rng), env: env, realm: realm, username: "user-\(hid.prefix(4))"))
        case 1: return (.refreshToken, refreshToken(hid: hid, env: env, client: client, secret: "fake-rt",
                                                   familyId: rng.next() % 2 == 0 ? "1" : nil))
        default:
            // Some with claims (with and without preferred_username), some that do not decode.
            let secret = switch rng.next() % 3 {
            case 0: "not.a.jwt.\(rng.next() % 1000)"
            case 1: Self.jwt(#"{"preferred_username":"user-\#(rng.next() % 1000)@example.com","tid":"t"}"#)
            default: Self.jwt(#"{"name":"no username \#(rng.next() % 1000)"}"#)
            }
            return (.idToken, idToken(hid: randomCase(hid, &rng), env: env, client: client, realm: realm, secret: secret))
        }
    }

    private static func jwt(_ payload: String) -> String {
        let encoded = Data(payload.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJub25lIn0.\(encoded).sig"
    }

    /// The lookup as it was before the typed index: every access token of the account, its JSON fields compared.
    private func scannedAccessToken(_ cache: TokenCache, hid: String, clientId: String, environment: String, tenant: String,
                                    scopes: [String], now: Int64) -> [CacheEntity] {
        let matches = cache.find(.accessToken, CacheQuery(homeAccountId: hid, environment: environment, clientId: clientId,
                                                          scopes: scopes.isEmpty ? nil : scopes))
        let eligible = matches.map(\.entity).filter { entity in
            guard let expiresOn = entity.expiresOn, expiresOn > now + expiryBufferSeconds else { return false }
            let stored = (entity.realm ?? "").lowercased(), wanted = tenant.lowercased()
            return tenant.isEmpty || stored == wanted || ["common", "organizations", "consumers"].contains(wanted)
        }
        guard let longest = eligible.compactMap(\.expiresOn).max() else { return [] }
        return eligible.filter { $0.expiresOn == longest }  // ties: the scan's order decides, any of them is right
    }

    func testTypedLookupGivesTheScansAnswerThroughRandomChanges() {
        for seed in UInt64(1)...12 {
            var rng = SplitMix(state: seed)
            var cache = TokenCache()
            var keys: [(CredentialKind, String)] = []
            for step in 0..<300 {
                switch rng.next() % 10 {
                case 0..<5:
                    let key = rng.next() % 3 == 0 && !keys.isEmpty ? keys.randomElement(using: &rng)!.1 : "at-\(step)"
                    cache.put(.accessToken, key: key, randomAccessToken(&rng))
                    keys.append((.accessToken, key))
                case 5, 6:
                    let (kind, entity) = randomOtherEntity(&rng)
                    keys.append((kind, cache.add(kind, entity)))
                case 7:
                    if let (kind, key) = keys.randomElement(using: &rng) { cache.remove(kind, key: key) }
                case 8:
                    if rng.next() % 4 == 0 {
                        _ = cache.signOut(accounts.randomElement(using: &rng)!)
                    } else {
                        _ = cache.removeAccount(accounts.randomElement(using: &rng)!, forClient: clients.randomElement(using: &rng)!)
                    }
                default:
                    var other = CacheDocument()
                    for index in 0..<3 { other.entries[.accessToken, default: [:]]["merged-\(step)-\(index)"] = randomAccessToken(&rng) }
                    _ = cache.merge(other)
                }
                for _ in 0..<5 { checkLookup(cache, &rng, seed: seed, step: step) }
                checkSummaries(&cache, seed: seed, step: step)
                if step % 3 == 0 { checkImportReplaces(&cache, &rng, seed: seed, step: step) }
            }
            // A cache read back from its document answers as the cache that made it.
            var reread = TokenCache(document: try! CacheDocument.parse(cache.persisted()))
            for _ in 0..<50 { checkLookup(reread, &rng, seed: seed, step: -1) }
            checkSummaries(&reread, seed: seed, step: -1)
        }
    }

    /// An import replaces exactly the access tokens that name the same credential as the incoming one, as the scan
    /// of the JSON entries finds them: same account, alias group, client, realm and key id, the same scopes case aside.
    private func checkImportReplaces(_ cache: inout TokenCache, _ rng: inout SplitMix, seed: UInt64, step: Int) {
        var incoming = randomAccessToken(&rng)
        incoming.set("cached_at", String(now + 1_000_000))  // newer than any held: it replaces what it names
        if rng.next() % 4 == 0 { incoming.set("key_id", "k\(rng.next() % 2)") }
        let key = "imported-\(step)"
        var expected: Set<String> = []
        if let environment = incoming.environment {
            let wanted = Set(incoming.target.map { $0.lowercased() })
            let query = CacheQuery(homeAccountId: incoming.homeAccountId ?? "", environment: environment,
                                   clientId: incoming.clientId ?? "", realm: incoming.realm ?? "")
            expected = Set(cache.find(.accessToken, query).filter { held in
                held.entity.keyId == incoming.keyId && Set(held.entity.target.map { $0.lowercased() }) == wanted
            }.map(\.key))
        }
        let before = Set(cache.find(.accessToken, CacheQuery()).map(\.key))
        var document = CacheDocument()
        document.entries[.accessToken] = [key: incoming]
        let report = cache.merge(document)
        let after = Set(cache.find(.accessToken, CacheQuery()).map(\.key))
        let context = "seed \(seed) step \(step): \(incoming.fields) replaced \(expected.sorted())"
        XCTAssertEqual(before.subtracting(after), expected, context)
        XCTAssertEqual(report.replaced, expected.isEmpty ? 0 : 1, context)
        XCTAssertTrue(after.contains(key), context)
    }

    private func checkLookup(_ cache: TokenCache, _ rng: inout SplitMix, seed: UInt64, step: Int) {
        let hid = randomCase(accounts.randomElement(using: &rng)!, &rng)
        let client = randomCase(clients.randomElement(using: &rng)!, &rng)
        let environment = randomCase(environments.randomElement(using: &rng)!, &rng)
        let tenant = randomCase((realms + ["common", "Organizations", "unknown"]).randomElement(using: &rng)!, &rng)
        var wanted = (0..<Int(rng.next() % 3)).map { _ in randomCase(scopes.randomElement(using: &rng)!, &rng) }
        if rng.next() % 20 == 0 { wanted.append("never.granted") }
        let at = now + Int64(rng.next() % 3600)
        let typed = cache.cachedAccessToken(homeAccountId: hid, clientId: client, environment: environment, tenant: tenant,
                                            scopes: wanted, now: at)
        let scanned = scannedAccessToken(cache, hid: hid, clientId: client, environment: environment, tenant: tenant,
                                         scopes: wanted, now: at)
        let context = "seed \(seed) step \(step): \(hid) \(client) \(environment) \(tenant) \(wanted) at \(at)"
        let idTokens = cache.find(.idToken, CacheQuery(homeAccountId: hid, environment: environment, clientId: client))
        let idToken = cache.latestIdToken(homeAccountId: hid, environment: environment, clientId: client)
        if let idToken {
            XCTAssertTrue(idTokens.contains { $0.entity.secret == idToken }, "id token not among the scan's: \(context)")
        } else {
            XCTAssertTrue(idTokens.allSatisfy { $0.entity.secret == nil }, "no id token, the scan found some: \(context)")
        }
        // The claim kept from when the token was stored is the one a decode of it now gives.
        let withUsername = cache.latestIdTokenAndUsername(homeAccountId: hid, environment: environment, clientId: client)
        XCTAssertEqual(withUsername?.idToken, idToken, context)
        XCTAssertEqual(withUsername?.preferredUsername,
                       idToken.flatMap { try? JWTPayload.claims(of: $0) }?["preferred_username"]?.stringValue, context)
        if let typed {
            XCTAssertTrue(scanned.contains(typed), "typed answer not among the scan's: \(context)")
        } else {
            XCTAssertTrue(scanned.isEmpty, "typed lookup found nothing, the scan found \(scanned.count): \(context)")
        }
        // A cache hit's lookup gives that token's fields, parsed when it was stored, and that id token.
        let hit = cache.cachedHitTokens(homeAccountId: hid, clientId: client, environment: environment, tenant: tenant,
                                        scopes: wanted, now: at)
        XCTAssertEqual(hit == nil, typed == nil, context)
        // The hit path names the account by what `resolveAccount` resolved: the same answer as by the id.
        let resolved = try? cache.resolveAccount(.homeAccountId(hid))
        XCTAssertEqual(resolved != nil, !cache.find(.account, CacheQuery(homeAccountId: hid)).isEmpty, context)
        XCTAssertEqual(resolved?.homeAccountId, resolved == nil ? nil : hid.lowercased(), context)
        if let resolved {
            let byAccount = cache.cachedHitTokens(homeAccountId: resolved.homeAccountId, account: resolved.account,
                                                  clientId: client, environment: environment, tenant: tenant,
                                                  scopes: wanted, now: at)
            XCTAssertEqual(byAccount?.accessToken.secret, hit?.accessToken.secret, context)
            XCTAssertEqual(byAccount?.idToken, hit?.idToken, context)
        }
        if let hit, let typed {
            XCTAssertEqual(hit.accessToken.secret, typed.secret ?? "", context)
            XCTAssertEqual(hit.accessToken.tokenType, typed.tokenType, context)
            XCTAssertEqual(hit.accessToken.expiresOn, typed.expiresOn ?? 0, context)
            XCTAssertEqual(hit.accessToken.extendedExpiresOn, typed.extendedExpiresOn ?? typed.expiresOn ?? 0, context)
            XCTAssertEqual(hit.accessToken.refreshOn, typed.refreshOn, context)
            XCTAssertEqual(hit.accessToken.target, typed.target, context)
            XCTAssertEqual(hit.idToken, idToken, context)
            XCTAssertEqual(hit.preferredUsername, withUsername?.preferredUsername, context)
        }
    }

    private func checkSummaries(_ cache: inout TokenCache, seed: UInt64, step: Int) {
        // A front end's text of the account: anything that changes with the summary. Written field by field:
        // `String(describing:)` walks the value by reflection, and was a third of this test's time.
        let text: TokenCache.AccountTextEncoder = { summary in
            var parts = [summary.homeAccountId, summary.username, summary.environment, summary.realm,
                         summary.localAccountId ?? "-", summary.name ?? "-", summary.authorityType ?? "-",
                         "\(summary.signInRequired)", summary.hiddenFrom.joined(separator: ",")]
            for tenant in summary.tenants {
                parts.append("\(tenant.realm) \(tenant.environment) \(tenant.localAccountId ?? "-") \(tenant.username ?? "-")")
            }
            for app in summary.apps {
                parts.append("\(app.clientId) \(app.familyId ?? "-") \(app.hasRefreshToken)")
                for token in app.accessTokens {
                    parts.append("\(token.scopes.joined(separator: " ")) \(token.realm ?? "-") \(token.expiresOn ?? -1)")
                }
            }
            parts.append(summary.accountClaims.map { JSONWriter().string(.object($0)) } ?? "-")
            return Array(parts.joined(separator: "|").utf8)
        }
        for hid in accounts {
            let built = cache.accountSummary(homeAccountId: hid, now: now)
            if let built { checkListedTokens(built, cache, context: "seed \(seed) step \(step): \(hid)") }
            XCTAssertEqual(cache.memoizedAccountSummary(homeAccountId: hid), built, "seed \(seed) step \(step): \(hid)")
            let memoized = cache.memoizedAccount(homeAccountId: hid, text: text)
            XCTAssertEqual(memoized?.text, built.flatMap(text), "seed \(seed) step \(step): \(hid)")
            // As a hit reads it: by the account its lookup resolved.
            let account = (try? cache.resolveAccount(.homeAccountId(hid)))?.account
            let read = cache.memoizedAccountText(homeAccountId: hid, account: account, text: text)
            XCTAssertEqual(read?.text, built.flatMap(text), "seed \(seed) step \(step): \(hid)")
            XCTAssertEqual(read?.username, built?.username, "seed \(seed) step \(step): \(hid)")
        }
    }

    /// The access tokens a summary lists for each app (read from the typed index) are those the account's entries
    /// give, scopes, realm and expiry as the entries have them, the latest expiry first.
    private func checkListedTokens(_ summary: AccountSummary, _ cache: TokenCache, context: String) {
        func line(_ scopes: [String], _ realm: String?, _ expiresOn: Int64?) -> String {
            "\(scopes.joined(separator: " ")) \(realm ?? "-") \(expiresOn.map(String.init) ?? "none")"
        }
        var expected: [String: [String]] = [:]
        for (_, token) in cache.find(.accessToken, CacheQuery(homeAccountId: summary.homeAccountId)) {
            guard let client = token.clientId?.lowercased() else { continue }
            expected[client, default: []].append(line(token.target, token.realm, token.expiresOn))
        }
        var listed: [String: [String]] = [:]
        for app in summary.apps where !app.accessTokens.isEmpty {
            listed[app.clientId, default: []] += app.accessTokens.map { line($0.scopes, $0.realm, $0.expiresOn) }
            let expiries = app.accessTokens.map { $0.expiresOn ?? 0 }
            XCTAssertEqual(expiries, expiries.sorted(by: >), context)
        }
        XCTAssertEqual(listed.mapValues { $0.sorted() }, expected.mapValues { $0.sorted() }, context)
    }

    /// Hiding an account from an app and flagging it for sign-in change brokerd's state, not the entries: the
    /// memoized summary must still say so.
    func testMemoizedSummaryFollowsTheState() {
        var cache = TokenCache()
        cache.add(.account, accountEntry(hid: "uid1.utid1", realm: "utid1", username: "someone@example.com"))
        cache.add(.accessToken, accessToken(hid: "uid1.utid1", client: "client-a", realm: "utid1", target: "User.Read",
                                            secret: "fake-at"))
        XCTAssertEqual(cache.memoizedAccountSummary(homeAccountId: "UID1.utid1")?.hiddenFrom, [])
        _ = cache.removeAccount("uid1.utid1", forClient: "client-b")
        cache.state.signInRequired.insert("uid1.utid1")
        let summary = cache.memoizedAccountSummary(homeAccountId: "uid1.utid1")
        XCTAssertEqual(summary?.hiddenFrom, ["client-b"])
        XCTAssertEqual(summary?.signInRequired, true)
        XCTAssertEqual(summary, cache.accountSummary(homeAccountId: "uid1.utid1", now: now))
        let text: TokenCache.AccountTextEncoder = { Array("\($0.signInRequired) \($0.hiddenFrom)".utf8) }
        XCTAssertEqual(cache.memoizedAccount(homeAccountId: "uid1.utid1", text: text)?.text, Array("true [\"client-b\"]".utf8))
        cache.state.signInRequired = []
        XCTAssertEqual(cache.memoizedAccountSummary(homeAccountId: "uid1.utid1")?.signInRequired, false)
        XCTAssertEqual(cache.memoizedAccount(homeAccountId: "uid1.utid1", text: text)?.text, Array("false [\"client-b\"]".utf8),
                       "the text is written again when the state changed")
        XCTAssertNil(cache.memoizedAccountSummary(homeAccountId: "uid9.utid1"))
    }

    /// Rows are hashed by their key's digest and their kind's case: rows alike but for their kind, their case or one
    /// byte of the key stay apart, and a row marked again (its key made anew) is the same row.
    func testChangedRowsApartByKindCaseAndKey() {
        let keys = (0..<200).map { "uid\($0).utid-login.microsoftonline.com-accesstoken-client-a-utid-user.read" }
        var rows: Set<CacheRow> = [.state]
        for key in keys {
            for kind in CredentialKind.allCases {
                rows.insert(.entry(kind, key: key))
                rows.insert(.opaque(kind, key: key))
            }
            rows.insert(.use(key))
            rows.insert(.learned(key))
            rows.insert(.section(key))
        }
        XCTAssertEqual(rows.count, keys.count * (CredentialKind.allCases.count * 2 + 3) + 1)
        for key in keys {
            let again = String(decoding: Array(key.utf8), as: UTF8.self)
            XCTAssertFalse(rows.insert(.entry(.idToken, key: again)).inserted, key)
            XCTAssertFalse(rows.contains(.entry(.idToken, key: again + " ")), key)
        }
        XCTAssertEqual(rows.count, keys.count * (CredentialKind.allCases.count * 2 + 3) + 1)
        let sections = Dictionary(uniqueKeysWithValues: CredentialKind.allCases.map { ($0, $0.sectionName) })
        XCTAssertEqual(CredentialKind.allCases.map { sections[$0] }, CredentialKind.allCases.map(\.rawValue))
    }

    /// A hit notes a use; the writer writes what is marked for as long as something is. A hit must mark nothing but a
    /// new use (or one whose time moved by the resolution): never the state row.
    func testNotingAUseMarksOnlyANewOrMovedUse() {
        var cache = TokenCache()
        let use = TokenUse(clientId: "client-a", homeAccountId: "uid1.utid1", authority: "https://login.example/t",
                           scopes: ["User.Read"], lastUsed: now)
        cache.noteUse(use)
        XCTAssertEqual(cache.takeChangedRows(), [.use(use.key)])
        var later = use
        later.lastUsed = now + 1
        cache.noteUse(later)
        XCTAssertEqual(cache.takeChangedRows(), [])
        later.lastUsed = now + 1 + TokenCache.useResolution
        cache.noteUse(later)
        XCTAssertEqual(cache.takeChangedRows(), [.use(use.key)])
        cache.state.signInRequired.insert("uid1.utid1")
        XCTAssertEqual(cache.takeChangedRows(), [.state])
    }
}
