import Benchmark
import BrokerCache
import BrokerCore
import BrokerJSON
import BrokerProtocol
import BrokerWire
import BrokerServer
import Foundation

// Varied lookups (issue #27): each iteration asks for another (account, scope) of the fixture cache, chosen
// pseudo-randomly among all its accounts and their 10 tokens, from a list of `variedQueryCount` queries made before
// the measurement. The benchmarks of sections 1 and 2 ask for one account and scope over and over; these pay for
// what a repeated request does not (the hash tables and the token text of another account each time, its summary
// looked up again), as a daemon serving many accounts does.
//
// Each varied benchmark has a sibling "(one query)" / "(one request)" asking the same code for the one fixed query
// of sections 1 and 2 (the account in the middle of the cache, token 3), so that repeated and varied are measured
// along the same path. Every query is asked once in the setup, which fails unless all hit; that pass also memoizes
// the summaries, so the figures are those of a warm daemon. A miss while measuring stops the run (fatalError).

/// Queries per varied benchmark, a power of two; at 10,000 accounts most accounts are asked for once or not at all.
let variedQueryCount = 4_096

/// An (account, token) of the fixture: account `index`, its access token `token` (the one for `Fixture.scope(token)`).
struct FixtureQuery {
    var index: Int
    var token: Int
    var account: Fixture.Account { Fixture.account(index) }
}

/// `count` (account, token) pairs of a cache of `accounts` accounts: with count 1, the fixed probe of sections 1
/// and 2; otherwise drawn with splitmix64 from a fixed seed, so that every run asks the same ones.
func fixtureQueries(accounts: Int, count: Int) -> [FixtureQuery] {
    if count == 1 { return [FixtureQuery(index: Fixture.probe(accounts: accounts).index, token: 3)] }
    var state: UInt64 = 0x5EED_0027
    func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    return (0..<count).map { _ in
        FixtureQuery(index: Int(next() % UInt64(accounts)), token: Int(next() % UInt64(Fixture.tokensPerAccount)))
    }
}

/// The names' tails: the varied list, or the one fixed query.
func variedLabel(queries: Int, varied: String, one: String) -> String { queries == 1 ? one : varied }

/// Stops the run when a measured iteration missed: the setup proved every query hits, so a miss is a bug of the
/// benchmark or of the cache, and its figures would be those of a miss.
func failOnMisses(_ misses: Int, _ what: String) {
    if misses > 0 { fatalError("\(what): \(misses) lookups missed while measuring; every one hit in the setup") }
}

// MARK: Cache lookup (BrokerCache)

/// A lookup's arguments, made before the measurement (the scopes array too).
struct LookupQuery {
    var homeAccountId: String
    var tenant: String
    var scopes: [String]
}

/// The cache the lookups read and memoize into, and where the list is: a class, so that the cache is mutated in place
/// (the only reference to its storage) and the position carries over from one measured call to the next.
final class VariedLookupState: @unchecked Sendable {
    var cache: TokenCache
    let queries: [LookupQuery]
    var next = 0

    init(accounts: Int, queries count: Int) throws {
        var cache = Fixture.cache(accounts: accounts)
        let queries = fixtureQueries(accounts: accounts, count: count).map {
            LookupQuery(homeAccountId: $0.account.homeAccountId, tenant: $0.account.tenant, scopes: [Fixture.scope($0.token)])
        }
        var misses = 0
        for (q, asked) in zip(queries, fixtureQueries(accounts: accounts, count: count)) {
            let token = cache.cachedAccessToken(homeAccountId: q.homeAccountId, clientId: Fixture.clientId,
                                                environment: Fixture.environment, tenant: q.tenant, scopes: q.scopes,
                                                now: Fixture.now)
            // The right token: the one of this account for this scope (the secrets are distinct per account and token).
            guard token?.secret == Fixture.secret(asked.index, asked.token),
                  cache.memoizedAccountSummary(homeAccountId: q.homeAccountId)?.accountClaimsText != nil
            else { misses += 1; continue }
        }
        guard misses == 0 else {
            throw BenchmarkSetupError("\(misses) of \(queries.count) varied lookups miss: a benchmark of a miss is worthless")
        }
        self.cache = cache
        self.queries = queries
    }
}

func variedCacheLookupBenchmarks() {
    for accounts in [1_000, 10_000] {
        for count in [variedQueryCount, 1] {
            let name = "Cache lookup \(variedLabel(queries: count, varied: "(varied)", one: "(one query)")): "
                + "cachedAccessToken + memoizedAccountSummary (\(accountsLabel(accounts)))"
            Benchmark(name) { (benchmark, state: VariedLookupState) in
                let mask = state.queries.count - 1
                var misses = 0
                for _ in benchmark.scaledIterations {
                    let q = state.queries[state.next & mask]
                    state.next &+= 1
                    let token = state.cache.cachedAccessToken(homeAccountId: q.homeAccountId, clientId: Fixture.clientId,
                                                              environment: Fixture.environment, tenant: q.tenant,
                                                              scopes: q.scopes, now: Fixture.now)
                    let summary = state.cache.memoizedAccountSummary(homeAccountId: q.homeAccountId)
                    if token == nil || summary == nil { misses += 1 }
                    blackHole(token)
                    blackHole(summary)
                }
                failOnMisses(misses, name)
            } setup: {
                try VariedLookupState(accounts: accounts, queries: count)
            }
        }
    }
}

// MARK: Silent hit (Broker.cachedSilentToken and the request line around it)

/// A broker of the fixture cache and the requests (or request lines) to ask it, in order.
final class VariedBrokerState<Query>: @unchecked Sendable {
    let state: BrokerState
    let queries: [Query]
    var next = 0

    init(state: BrokerState, queries: [Query]) {
        self.state = state
        self.queries = queries
    }
}

/// What `RequestRouter.cachedAnswer` does with a line that its connection's memo does not answer, with the front end's
/// own translation (`SocketWire`: the account's text kept with its memoized summary, the answer's text) but without the
/// app-access check, the memo, the audit and the logging, which BrokerServer does not expose: the line parsed, its params read, the broker asked, the answer's text made, the answer line
/// written. nil for anything but a hit.
func answerLine(_ line: [UInt8], broker: Broker) -> [UInt8]? {
    // Read in one pass as the connection reads a plain line (`SilentRequestLine`).
    guard let read = SilentRequestLine(line), let hid = read.params.account.homeAccountId else { return nil }
    let (id, p) = (read.id, read.params)
    let silent = SilentTokenRequest(clientId: p.clientId, authority: p.authority,
                                    scopes: Scopes.withResource(p.scopes, resource: p.resource),
                                    account: .homeAccountId(hid), forceRefresh: p.forceRefresh ?? false, claims: p.claims)
    guard let hit = broker.cachedSilentToken(silent, accountText: socketAccountText),
          let text = SocketWire.tokenResultText(hit)
    else { return nil }
    // The connection writes the answer's pieces with one gathering write; here they are joined once instead.
    return text.answerLine(id: id, correlationId: p.correlationId)
}

func variedSilentHitBenchmarks() {
    Benchmark("Silent hit (varied): Broker.cachedSilentToken (10,000 accounts)") {
        (benchmark, varied: VariedBrokerState<SilentTokenRequest>) in
        let (broker, mask) = (varied.state.broker, varied.queries.count - 1)
        var misses = 0
        for _ in benchmark.scaledIterations {
            let hit = broker.cachedSilentToken(varied.queries[varied.next & mask])
            varied.next &+= 1
            if hit == nil { misses += 1 }
            blackHole(hit)
        }
        failOnMisses(misses, "Broker.cachedSilentToken (varied)")
    } setup: {
        let state = try await BrokerState(accounts: 10_000)
        liveBrokers.append(state)
        let asked = fixtureQueries(accounts: 10_000, count: variedQueryCount)
        let requests = asked.map { Fixture.silentRequest(for: $0.account, token: $0.token) }
        var misses = 0
        for (request, q) in zip(requests, asked) {
            guard let hit = state.broker.cachedSilentToken(request), hit.outcome.source == "cache",
                  hit.outcome.accessToken == Fixture.secret(q.index, q.token) else { misses += 1; continue }
        }
        guard misses == 0 else {
            throw BenchmarkSetupError("\(misses) of \(requests.count) varied requests miss: a benchmark of a miss is worthless")
        }
        return VariedBrokerState(state: state, queries: requests)
    } teardown: {
        await shutDownBrokers()
    }

    for count in [variedQueryCount, 1] {
        let name = "Silent hit \(variedLabel(queries: count, varied: "(varied)", one: "(one request)")): "
            + "request line to answer line (1,000 accounts)"
        Benchmark(name) { (benchmark, varied: VariedBrokerState<[UInt8]>) in
            let (broker, mask) = (varied.state.broker, varied.queries.count - 1)
            var misses = 0
            for _ in benchmark.scaledIterations {
                let answer = answerLine(varied.queries[varied.next & mask], broker: broker)
                varied.next &+= 1
                if answer == nil { misses += 1 }
                blackHole(answer)
            }
            failOnMisses(misses, name)
        } setup: {
            let state = try await BrokerState(accounts: 1_000)
            liveBrokers.append(state)
            let asked = fixtureQueries(accounts: 1_000, count: count)
            let lines = asked.map { requestLine(for: $0.account, token: $0.token) }
            var misses = 0
            for (line, q) in zip(lines, asked) {
                // The answer carries this account's token for this scope.
                guard let answer = answerLine(line, broker: state.broker),
                      String(decoding: answer, as: UTF8.self).contains(Fixture.secret(q.index, q.token))
                else { misses += 1; continue }
            }
            guard misses == 0 else {
                throw BenchmarkSetupError("\(misses) of \(lines.count) request lines miss: a benchmark of a miss is worthless")
            }
            return VariedBrokerState(state: state, queries: lines)
        } teardown: {
            await shutDownBrokers()
        }
    }
}
