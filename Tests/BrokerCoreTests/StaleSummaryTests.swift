@testable import BrokerCache
import XCTest

/// An account's memoized summary and text, made again when the account changes (`remakeStaleSummaries`, which
/// `CacheCell` calls when a change is done): the next hit after a refresh of the account's tokens finds them made.
final class StaleSummaryTests: XCTestCase {
    /// The count of the account's access tokens and their scopes: what a change below changes.
    private let text: TokenCache.AccountTextEncoder = { summary in
        let tokens = summary.apps.flatMap(\.accessTokens).map { $0.scopes.joined(separator: "+") }.sorted()
        return Array("\(summary.username): \(tokens.joined(separator: ","))".utf8)
    }

    private func hid(_ index: Int) -> String { "uid\(index).utid" }

    private func cache(accounts: Int) -> TokenCache {
        var cache = TokenCache()
        for index in 0..<accounts {
            cache.add(.account, accountEntry(hid: hid(index), realm: "utid", username: "user\(index)@example.test"))
            cache.add(.refreshToken, refreshToken(hid: hid(index), client: "client-a", secret: "rt-\(index)"))
            cache.add(.accessToken, accessToken(hid: hid(index), client: "client-a", realm: "utid", target: "User.Read",
                                                secret: "at-\(index)"))
        }
        return cache
    }

    private func kept(_ cache: TokenCache, _ index: Int) -> String? {
        cache.keptAccountText(homeAccountId: hid(index), withText: true)?.text.map { String(decoding: $0, as: UTF8.self) }
    }

    func testAChangedAccountsSummaryIsMadeAgainWithTheChange() {
        var cache = cache(accounts: 2)
        XCTAssertEqual(cache.memoizedAccountText(homeAccountId: hid(0), text: text)?.text.map { String(decoding: $0, as: UTF8.self) },
                       "user0@example.test: User.Read")
        // A refreshed token and a new one: the memo is stale until the change is done, then made with them.
        cache.add(.accessToken, accessToken(hid: hid(0), client: "client-a", realm: "utid", target: "User.Read",
                                            secret: "at-0-refreshed", cachedAt: "2000", expiresOn: "5600"))
        cache.add(.accessToken, accessToken(hid: hid(0), client: "client-a", realm: "utid", target: "Mail.Read",
                                            secret: "at-0-mail"))
        XCTAssertNil(kept(cache, 0), "a changed account's text is not kept as it was")
        cache.remakeStaleSummaries()
        XCTAssertEqual(kept(cache, 0), "user0@example.test: Mail.Read,User.Read")
        XCTAssertEqual(cache.memoizedAccountSummary(homeAccountId: hid(0)), cache.accountSummary(homeAccountId: hid(0), now: 0))
        // An account no hit made a memo for is not made by a change of it.
        cache.add(.accessToken, accessToken(hid: hid(1), client: "client-a", realm: "utid", target: "Mail.Read", secret: "m"))
        cache.remakeStaleSummaries()
        XCTAssertNil(kept(cache, 1))
    }

    func testAnAccountSignedOutIsNotMadeAgain() {
        var cache = cache(accounts: 1)
        _ = cache.memoizedAccountText(homeAccountId: hid(0), text: text)
        _ = cache.signOut(hid(0))
        cache.remakeStaleSummaries()
        XCTAssertNil(kept(cache, 0))
        XCTAssertNil(cache.memoizedAccountSummary(homeAccountId: hid(0)))
    }

    /// An import that changes many memoized accounts at once leaves them to their next hits.
    func testABulkChangeLeavesTheSummariesToTheirNextHits() {
        let most = TokenCache.staleSummariesRemade
        for (accounts, remade) in [(most, true), (most + 1, false)] {
            var cache = cache(accounts: accounts)
            for index in 0..<accounts { _ = cache.memoizedAccountText(homeAccountId: hid(index), text: text) }
            for index in 0..<accounts {
                cache.add(.accessToken, accessToken(hid: hid(index), client: "client-a", realm: "utid",
                                                    target: "Mail.Read", secret: "m-\(index)"))
            }
            cache.remakeStaleSummaries()
            for index in 0..<accounts {
                XCTAssertEqual(kept(cache, index), remade ? "user\(index)@example.test: Mail.Read,User.Read" : nil,
                               "\(accounts) accounts changed, account \(index)")
            }
            // Made by the next hit either way.
            XCTAssertEqual(cache.memoizedAccountText(homeAccountId: hid(0), text: text)?.text.map { String(decoding: $0, as: UTF8.self) },
                           "user0@example.test: Mail.Read,User.Read")
        }
    }
}
