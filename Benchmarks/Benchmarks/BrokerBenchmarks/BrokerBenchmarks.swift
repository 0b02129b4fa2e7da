import Benchmark
import BrokerCache
import BrokerCore
import BrokerJSON
import BrokerProtocol
import BrokerServer
import BrokerWire
import Foundation

// In-process benchmarks of brokerd's hot paths. Not built or run by CI: see ../../README.md.

let metrics: [BenchmarkMetric] = [.wallClock, .cpuTotal, .mallocCountTotal, .throughput]

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: metrics, maxDuration: .seconds(2), maxIterations: 100_000)

    cacheLookupBenchmarks()
    silentHitBenchmarks()
    variedCacheLookupBenchmarks()
    variedSilentHitBenchmarks()
    protocolBenchmarks()
    persistenceBenchmarks()
}

// MARK: 1. Cache lookup (BrokerCache): what a silent hit asks the cache, at three cache sizes

struct LookupState: @unchecked Sendable {
    var cache: TokenCache
    var account: Fixture.Account
}

func cacheLookupBenchmarks() {
    for accounts in [1, 1_000, 10_000] {
        let label = accountsLabel(accounts)
        let setup: () async throws -> LookupState = {
            let cache = Fixture.cache(accounts: accounts)
            let probe = Fixture.probe(accounts: accounts).account
            guard cache.cachedAccessToken(homeAccountId: probe.homeAccountId, clientId: Fixture.clientId,
                                          environment: Fixture.environment, tenant: probe.tenant,
                                          scopes: [Fixture.scope(3)], now: Fixture.now) != nil,
                  cache.accountSummary(homeAccountId: probe.homeAccountId, now: Fixture.now)?.accountClaimsText != nil
            else { throw BenchmarkSetupError("the lookup does not hit: a benchmark of a miss is worthless") }
            return LookupState(cache: cache, account: probe)
        }

        Benchmark("Cache lookup: cachedAccessToken + accountSummary (\(label))") { benchmark, state in
            let (cache, a) = (state.cache, state.account)
            for _ in benchmark.scaledIterations {
                blackHole(cache.cachedAccessToken(homeAccountId: a.homeAccountId, clientId: Fixture.clientId,
                                                  environment: Fixture.environment, tenant: a.tenant,
                                                  scopes: [Fixture.scope(3)], now: Fixture.now))
                blackHole(cache.accountSummary(homeAccountId: a.homeAccountId, now: Fixture.now))
            }
        } setup: { try await setup() }

        Benchmark("Cache lookup: cachedAccessToken (\(label))") { benchmark, state in
            let (cache, a) = (state.cache, state.account)
            for _ in benchmark.scaledIterations {
                blackHole(cache.cachedAccessToken(homeAccountId: a.homeAccountId, clientId: Fixture.clientId,
                                                  environment: Fixture.environment, tenant: a.tenant,
                                                  scopes: [Fixture.scope(3)], now: Fixture.now))
            }
        } setup: { try await setup() }

        Benchmark("Cache lookup: accountSummary (\(label))") { benchmark, state in
            let (cache, a) = (state.cache, state.account)
            for _ in benchmark.scaledIterations {
                blackHole(cache.accountSummary(homeAccountId: a.homeAccountId, now: Fixture.now))
            }
        } setup: { try await setup() }
    }
}

// MARK: 2. The silent cache hit as the daemon answers it on the connection's thread (Broker.cachedSilentToken)

final class BrokerState: @unchecked Sendable {
    let broker: Broker
    let identity: IdPClient
    let request: SilentTokenRequest
    let account: Fixture.Account

    init(accounts: Int) async throws {
        identity = try IdPClient(settings: .init())
        // keyStore .memory: nothing is written, the path is never used.
        broker = Broker(store: CacheStore(path: "/nonexistent/brokerd-bench/cache.db", keyStore: .memory),
                        identity: identity, logger: Fixture.quietLogger)
        _ = try await broker.importCache(Fixture.cache(accounts: accounts).exported())
        account = Fixture.probe(accounts: accounts).account
        request = Fixture.silentRequest(for: account)
        // The fast path answers an Entra host only once the slow path started its alias lookup for it (instance
        // discovery runs in the background; here it fails harmlessly, without a network).
        _ = try await broker.acquireTokenSilently(request)
        guard let hit = broker.cachedSilentToken(request), hit.outcome.source == "cache" else {
            throw BenchmarkSetupError("cachedSilentToken misses: a benchmark of a miss is worthless")
        }
    }

    func shutdown() async {
        await identity.shutdown()
    }
}

/// Brokers made by setups, whose HTTP clients teardown shuts down.
nonisolated(unsafe) var liveBrokers: [BrokerState] = []

func accountsLabel(_ n: Int) -> String {
    switch n {
    case 1: return "1 account"
    case 1_000: return "1,000 accounts"
    case 10_000: return "10,000 accounts"
    default: return "\(n) accounts"
    }
}

func shutDownBrokers() async {
    for state in liveBrokers { await state.shutdown() }
    liveBrokers = []
}

func silentHitBenchmarks() {
    for accounts in [1, 10_000] {
        let label = accountsLabel(accounts)
        Benchmark("Silent hit: Broker.cachedSilentToken (\(label))") { (benchmark, state: BrokerState) in
            let (broker, request) = (state.broker, state.request)
            for _ in benchmark.scaledIterations {
                blackHole(broker.cachedSilentToken(request))
            }
        } setup: {
            let state = try await BrokerState(accounts: accounts)
            liveBrokers.append(state)
            return state
        } teardown: {
            await shutDownBrokers()
        }
    }

    // The whole answer a connection's thread makes for a hit: request line in, answer line out
    // (RequestRouter.cachedAnswer without the logging).
    Benchmark("Silent hit: request line to answer line (1 account)") { (benchmark, state: (BrokerState, [UInt8])) in
        let (broker, line) = (state.0.broker, state.1)
        for _ in benchmark.scaledIterations {
            guard case .single(.success(let request)) = RPCEnvelope.parse(line), let id = request.id,
                  let p = try? ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: request.params ?? .object(JSONObject())),
                  let hid = p.account.homeAccountId else { fatalError("request line does not decode") }
            let silent = SilentTokenRequest(clientId: p.clientId, authority: p.authority,
                                            scopes: Scopes.withResource(p.scopes, resource: p.resource),
                                            account: .homeAccountId(hid), forceRefresh: p.forceRefresh ?? false, claims: p.claims)
            guard let hit = broker.cachedSilentToken(silent, accountText: socketAccountText),
                  let text = SocketWire.tokenResultText(hit)
            else { fatalError("cache miss") }
            blackHole(text.answerLine(id: id, correlationId: p.correlationId))
        }
    } setup: {
        let state = try await BrokerState(accounts: 1)
        liveBrokers.append(state)
        return (state, requestLine(for: state.account))
    } teardown: {
        await shutDownBrokers()
    }

    // A repeated request (RequestRouter.rememberedAnswer): the line's shape found (no parse), the broker asked
    // whether the remembered answer still holds, the id and correlation id put into the remembered text.
    Benchmark("Silent hit: remembered answer, request line to answer line (1 account)") {
        (benchmark, state: (BrokerState, [UInt8], TokenResultText, HitFreshness)) in
        let (broker, line, text) = (state.0.broker, state.1, state.2)
        var freshness = state.3
        for _ in benchmark.scaledIterations {
            guard let shape = RequestLineShape(line), let id = shape.id, let correlationId = shape.correlationId,
                  broker.isStillFresh(&freshness)
            else { fatalError("the remembered answer is stale") }
            blackHole(shape.key.hashValue)
            blackHole(text.answerLine(id: id, correlationId: correlationId))
        }
    } setup: {
        let state = try await BrokerState(accounts: 1)
        liveBrokers.append(state)
        guard let hit = state.broker.cachedSilentToken(state.request, accountText: socketAccountText),
              let text = SocketWire.tokenResultText(hit) else { throw BenchmarkSetupError("cache miss") }
        return (state, requestLine(for: state.account), text, hit.freshness)
    } teardown: {
        await shutDownBrokers()
    }

    // The same request as the one answered last (SilentAnswerMemo's pattern): the line compared with the last one
    // around its id and correlation id, the broker asked whether the answer still holds, the answer's pieces made
    // for one gathering write (summed here instead of written).
    Benchmark("Silent hit: the last request again, request line to answer pieces (1 account)") {
        (benchmark, state: (BrokerState, [UInt8], TokenResultText, HitFreshness, RepeatedRequestPattern)) in
        let (broker, line, text, pattern) = (state.0.broker, state.1, state.2, state.4)
        var freshness = state.3
        for _ in benchmark.scaledIterations {
            guard let values = line.withUnsafeBytes({ pattern.match($0) }), broker.isStillFresh(&freshness)
            else { fatalError("not the same request, or the remembered answer is stale") }
            text.withAnswerLinePieces(id: values.id, correlationId: values.correlationId) { pieces in
                blackHole(pieces.reduce(0) { $0 + $1.count })
            }
        }
    } setup: {
        let state = try await BrokerState(accounts: 1)
        liveBrokers.append(state)
        guard let hit = state.broker.cachedSilentToken(state.request, accountText: socketAccountText),
              let text = SocketWire.tokenResultText(hit) else { throw BenchmarkSetupError("cache miss") }
        let line = requestLine(for: state.account)
        guard let shape = RequestLineShape(line) else { throw BenchmarkSetupError("no shape") }
        return (state, line, text, hit.freshness, RepeatedRequestPattern(line: line, shape: shape))
    } teardown: {
        await shutDownBrokers()
    }
}

// MARK: 3. JSON-RPC: decoding an acquireTokenSilently request, encoding a TokenResult answer

/// The request line of an acquireTokenSilently for the account's token `token` (its scope), in its home tenant.
func requestLine(for a: Fixture.Account, token t: Int = 3) -> [UInt8] {
    let params = JSONObject([
        "clientId": .string(Fixture.clientId),
        "authority": .string("https://login.microsoftonline.com/\(a.tenant)"),
        "scopes": .array([.string(Fixture.scope(t))]),
        "account": .object(JSONObject(["homeAccountId": .string(a.homeAccountId)])),
        "correlationId": .string(Fixture.guid(7, salt: 0xC0)),
    ])
    return RPCEnvelope.request(id: 42, method: BrokerMethod.acquireTokenSilently.rawValue,
                               paramsJSON: JSONWriter().bytes(.object(params)))
}

func protocolBenchmarks() {
    Benchmark("JSON-RPC: decode acquireTokenSilently request") { benchmark, line in
        for _ in benchmark.scaledIterations {
            guard case .single(.success(let request)) = RPCEnvelope.parse(line),
                  let params = try? ProtocolCoding.decode(AcquireTokenSilentlyParams.self,
                                                          from: request.params ?? .object(JSONObject()))
            else { fatalError("request line does not decode") }
            blackHole(params)
        }
    } setup: {
        let line = requestLine(for: Fixture.account(0))
        guard case .single(.success(let request)) = RPCEnvelope.parse(line),
              (try? ProtocolCoding.decode(AcquireTokenSilentlyParams.self, from: request.params ?? .object(JSONObject()))) != nil
        else { throw BenchmarkSetupError("request line does not decode") }
        return line
    }

    Benchmark("JSON-RPC: encode TokenResult answer") { (benchmark, result: TokenResult) in
        for _ in benchmark.scaledIterations {
            guard let json = try? ProtocolCoding.encode(result) else { fatalError("TokenResult does not encode") }
            blackHole(RPCEnvelope.success(id: "42", resultJSON: json))
        }
    } setup: {
        // The answer to a hit of the 1-account cache: 1.5 KB access token, id token, account with 10 tokens, claims.
        let cache = Fixture.cache(accounts: 1)
        let a = Fixture.account(0)
        guard let token = cache.cachedAccessToken(homeAccountId: a.homeAccountId, clientId: Fixture.clientId,
                                                  environment: Fixture.environment, tenant: a.tenant,
                                                  scopes: [Fixture.scope(3)], now: Fixture.now),
              let summary = cache.accountSummary(homeAccountId: a.homeAccountId, now: Fixture.now)
        else { throw BenchmarkSetupError("no token to answer with") }
        return TokenResult(
            accessToken: token.secret ?? "", tokenType: token.tokenType, expiresOn: token.expiresOn ?? 0,
            extendedExpiresOn: token.extendedExpiresOn ?? 0, refreshOn: token.refreshOn, grantedScopes: token.target,
            idToken: cache.latestIdToken(homeAccountId: a.homeAccountId, environment: Fixture.environment,
                                         clientId: Fixture.clientId),
            account: wire(summary), authority: "https://login.microsoftonline.com/\(a.tenant)",
            correlationId: Fixture.guid(7, salt: 0xC0), source: "cache")
    }
}

// MARK: 4. Persistence: one changed row written to a CacheStore of 100,000 access tokens (fsync included)

final class StoreState: @unchecked Sendable {
    let directory: String
    let store: CacheStore
    var cache: TokenCache
    let keys: [String]
    var next = 0

    init(accessTokens: Int) async throws {
        directory = try Fixture.temporaryDirectory()
        store = CacheStore(path: directory + "/cache.db", keyStore: .file(path: directory + "/cache.key"))
        _ = try await store.load()
        cache = Fixture.cache(accounts: accessTokens / Fixture.tokensPerAccount, accessTokensOnly: true)
        try await store.write(cache.allRows().map(cache.value(of:)))
        // Rows to change, spread over the whole cache.
        keys = cache.all(.accessToken).map(\.key).sorted()
        guard keys.count == accessTokens else { throw BenchmarkSetupError("expected \(accessTokens) access tokens") }
    }

    /// What a refresh does to a token row: a new expiry (and the row goes to disk).
    func writeOneChange() async throws {
        let key = keys[(next &* 7_919) % keys.count]
        next += 1
        guard var entity = cache.entity(.accessToken, key: key) else { fatalError("key vanished") }
        entity.setTimestamp("cached_at", Fixture.now + Int64(next))
        entity.setTimestamp("expires_on", Fixture.now + 86_400 + Int64(next))
        cache.put(.accessToken, key: key, entity)
        try await store.write([cache.value(of: .entry(.accessToken, key: key))])
    }

    func close() async {
        await store.close()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

nonisolated(unsafe) var storeState: StoreState?

func persistenceBenchmarks() {
    Benchmark("Persist one changed row (100,000 access tokens, fsync)",
              configuration: .init(metrics: metrics, maxDuration: .seconds(5), maxIterations: 2_000)) { (benchmark, state: StoreState) in
        for _ in benchmark.scaledIterations {
            do { try await state.writeOneChange() } catch { benchmark.error("write failed: \(error)") }
        }
    } setup: {
        let state = try await StoreState(accessTokens: 100_000)
        storeState = state
        return state
    } teardown: {
        await storeState?.close()
        storeState = nil
    }
}
