import BrokerCache
import BrokerJSON

#if canImport(Glibc)
import Glibc
#endif

/// When the background refresh acts.
public struct BackgroundRefreshSettings: Sendable, Equatable {
    /// The wait between checks. Each check reads the wall clock, so a machine that slept past an expiry catches up
    /// at the first check after it wakes.
    public var checkInterval: Duration
    /// Renew an access token this long before it expires (or at its refresh_on), if it was used recently.
    public var renewAheadSeconds: Int64
    /// "Used recently": asked for within this window.
    public var recentWindowSeconds: Int64
    /// Redeem a refresh token that has not been used for this long, so the IdP does not drop it as idle
    /// (Entra: 90 days).
    public var keepAliveSeconds: Int64
    /// The wait after a first failed refresh of a token; it doubles with each failure, up to an hour, ±50 % jitter.
    public var firstBackoffSeconds: Int64

    public init(checkInterval: Duration = .seconds(60), renewAheadSeconds: Int64 = 600, recentWindowSeconds: Int64 = 8 * 3600,
                keepAliveSeconds: Int64 = 7 * 86400, firstBackoffSeconds: Int64 = 60) {
        self.checkInterval = checkInterval
        self.renewAheadSeconds = renewAheadSeconds
        self.recentWindowSeconds = recentWindowSeconds
        self.keepAliveSeconds = keepAliveSeconds
        self.firstBackoffSeconds = firstBackoffSeconds
    }
}

extension Broker {
    /// Runs `refreshDueTokens` every `checkInterval` until the task is cancelled. The wait is on a clock that
    /// counts a suspend, so the first check after the machine wakes comes at once, and each check compares the
    /// tokens with the wall clock of that moment: a step of the wall clock, either way, takes effect at the next check.
    public func runBackgroundRefresh(_ settings: BackgroundRefreshSettings) async {
        await loaded()
        var checks = 0
        while !Task.isCancelled {
            let renewed = await refreshDueTokens(settings, now: now())
            checks += 1
            // What a test waits for to see that a check came and went ("nothing was renewed in two checks").
            logger.debug("background refresh check done", metadata: ["check": "\(checks)", "renewed": "\(renewed)"])
            // Token uses noted by cache hits are persisted here, not by the hits themselves.
            if cache.hasChangedRows { changed() }
            if refreshAgain {
                refreshAgain = false
                continue
            }
            let wait = Task { [clock] in _ = try? await clock.sleep(for: settings.checkInterval) }
            refreshWait = wait
            await withTaskCancellationHandler { await wait.value } onCancel: { wait.cancel() }
            refreshWait = nil
        }
    }

    /// The network may be back (an address or route appeared, the machine woke up, NetworkManager connected): every
    /// host is worth trying again at once, and so is every background refresh that was waiting out a failure.
    public func networkChanged(_ why: String) {
        let hosts = identity?.transport.backoff.reset() ?? []
        let waiting = refreshBackoff.count
        refreshBackoff = [:]
        logger.log(level: hosts.isEmpty && waiting == 0 ? .debug : .info, "network changed; trying again", metadata: [
            "why": "\(why)", "hosts": "\(hosts.joined(separator: " "))", "waiting_refreshes": "\(waiting)",
        ])
        if let refreshWait { refreshWait.cancel() } else { refreshAgain = true }
    }

    /// One pass: renews the access tokens of recent uses that expire within `renewAheadSeconds` (or passed
    /// refresh_on), and redeems refresh tokens idle for `keepAliveSeconds`. Failures back off exponentially with
    /// jitter (`firstBackoffSeconds` … 1 h, measured on `elapsed()` so that a wall-clock step back cannot postpone a
    /// retry by as much); an account that needs sign-in is left alone. Returns how many tokens were renewed.
    @discardableResult
    public func refreshDueTokens(_ settings: BackgroundRefreshSettings, now: Int64) async -> Int {
        var renewed = 0
        for use in cache.state.uses.values.sorted(by: { $0.key < $1.key }) {
            guard !cache.state.signInRequired.contains(use.homeAccountId.lowercased()) else { continue }
            if let backoff = refreshBackoff[use.key], backoff.nextAttempt > elapsed() { continue }
            guard let authority = Authority(use.authority), isDue(use, authority: authority, settings, now: now) else { continue }
            let request = SilentTokenRequest(clientId: use.clientId, authority: use.authority, scopes: use.scopes,
                                             account: .homeAccountId(use.homeAccountId), forceRefresh: true)
            do {
                let lastUsed = use.lastUsed
                _ = try await acquireTokenSilently(request, countAsUse: false)
                if var kept = cache.state.uses[use.key] {
                    kept.lastUsed = lastUsed  // the refresh itself is not a use
                    cache.setUse(use.key, kept)
                }
                refreshBackoff[use.key] = nil
                renewed += 1
            } catch {
                switch error {
                case .unavailable, .serverError, .internal:
                    let failures = (refreshBackoff[use.key]?.failures ?? 0) + 1
                    let base = min(settings.firstBackoffSeconds << min(failures - 1, 12), 3600)
                    let delay = max(1, Int64(Double(base) * Double.random(in: 0.5...1.5)))
                    refreshBackoff[use.key] = (failures, elapsed() + delay)
                    emit(.refreshFailed(homeAccountId: use.homeAccountId, clientId: use.clientId, authority: use.authority,
                                        reason: error.description, retryInSeconds: delay))
                    logger.notice("background refresh failed; backing off", metadata: [
                        "client_id": "\(use.clientId)", "account": "\(use.homeAccountId)", "retry_in_s": "\(delay)",
                    ])
                default:
                    // InteractionRequired and the like: the account is flagged; nothing to retry on our own.
                    cache.setUse(use.key, nil)
                }
            }
        }
        return renewed
    }

    private func isDue(_ use: TokenUse, authority: Authority, _ settings: BackgroundRefreshSettings, now: Int64) -> Bool {
        let refreshTokens = cache.find(.refreshToken, CacheQuery(homeAccountId: use.homeAccountId, environment: authority.environment,
                                                                  clientId: use.clientId))
        guard let newest = refreshTokens.map({ $0.entity.lastModificationTime ?? 0 }).max() else { return false }
        // Comparisons keep the arithmetic on `now`: timestamps from an imported cache can be anything.
        if newest <= now - settings.keepAliveSeconds { return true }
        guard use.lastUsed >= now - settings.recentWindowSeconds else { return false }
        let scopes = Scopes.requested(use.scopes)
        let tokens = cache.find(.accessToken, CacheQuery(homeAccountId: use.homeAccountId, environment: authority.environment,
                                                          clientId: use.clientId, scopes: scopes.isEmpty ? nil : scopes))
        guard let best = tokens.max(by: { ($0.entity.expiresOn ?? 0) < ($1.entity.expiresOn ?? 0) })?.entity else { return true }
        if let refreshOn = best.refreshOn, refreshOn <= now { return true }
        return (best.expiresOn ?? 0) < now + settings.renewAheadSeconds
    }
}
