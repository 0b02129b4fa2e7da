import BrokerConfig
import BrokerProtocol

/// The identity providers as brokerd and this machine see them (getStatus.network, since protocol 1.7), the clock
/// against theirs, and whether brokerd can start a browser for a sign-in.
enum DoctorNetwork {
    /// brokerd refreshes a discovery document it uses once it is older than this (discovery_ttl's default).
    static let discoveryLifetime: Int64 = 24 * 3600
    /// Past this, tokens look expired or not yet valid (the usual leeway of token validation is five minutes).
    static let clockSkewLimit: Int64 = 300

    static func reachability(_ context: DoctorContext, configuration: BrokerConfiguration?) -> [DoctorFinding] {
        let network = context.status?.network
        let discoveries = (network?.learned ?? []).filter { $0.kind == "discovery" }
        let unreachable = network?.unreachableHosts ?? []
        var targets: [String: DoctorProbe.Target] = [:]
        for fact in discoveries { targets[fact.subject] = DoctorProbe.target(url: fact.subject) }
        for host in unreachable {
            let scheme = discoveries.first { DoctorProbe.target(url: $0.subject)?.label == DoctorProbe.target(hostPort: host.host)?.label }
            targets[host.host] = scheme.flatMap { DoctorProbe.target(url: $0.subject) } ?? DoctorProbe.target(hostPort: host.host)
        }
        if context.status == nil, let authority = configuration?.defaultAuthority {
            targets[authority] = DoctorProbe.target(url: authority)
        }
        let probes = DoctorProbe.connectAll(Array(Set(targets.values)))
        func probe(_ key: String) -> (label: String, failure: String?)? {
            guard let target = targets[key], let result = probes[target] else { return nil }
            return (target.label, result)
        }
        var findings = unreachable.map { unreachableHost($0, probe: probe($0.host)) }
        findings += discoveries.map { discovery($0, context: context, probe: probe($0.subject), unreachable: unreachable) }
        if context.status == nil, let authority = configuration?.defaultAuthority, let tried = probe(authority) {
            findings.append(tried.failure.map {
                .error("network.reachable", "cannot connect to \(tried.label), the default_authority's host: \($0)",
                       fix: "Check your network connection, VPN, proxy and DNS.", subject: authority)
            } ?? .ok("network.reachable", "\(tried.label) (default_authority) accepts connections", subject: authority))
        }
        if findings.isEmpty {
            let why = context.status == nil ? "brokerd is not running"
                : network == nil ? "this brokerd does not report its network (protocol \(context.status?.protocolVersion ?? "?"))"
                : "brokerd has not talked to an identity provider yet"
            findings.append(.ok("network.reachable", "no identity provider to check: \(why)"))
        }
        return findings
    }

    private static func unreachableHost(_ host: UnreachableHost, probe: (label: String, failure: String?)?) -> DoctorFinding {
        let retry = host.retryAfter > 0 ? "it tries again in \(host.retryAfter) s" : "the next request tries again"
        let failures = "\(host.failures) failure\(host.failures == 1 ? "" : "s") in a row"
        let seen = "brokerd could not reach \(host.host): \(host.reason) (\(failures); \(retry))"
        let fix = "Check your network connection, VPN, proxy and DNS. brokerd tries again by itself; sign-ins and token "
            + "refreshes for this provider fail until then, cached tokens are still served."
        guard let probe else { return .error("network.unreachable", seen, fix: fix, subject: host.host) }
        if let failure = probe.failure {
            return .error("network.unreachable", seen + "; from here too: \(failure)", fix: fix, subject: host.host)
        }
        return .warning("network.unreachable", seen + "; \(probe.label) accepts connections from here now",
                        fix: "Nothing, if it stays so: brokerd's next request reaches it. If not, check proxy settings "
                          + "and the identity provider's status.", subject: host.host)
    }

    private static func discovery(_ fact: LearnedFact, context: DoctorContext, probe: (label: String, failure: String?)?,
                                  unreachable: [UnreachableHost]) -> DoctorFinding {
        let age = max(0, context.now - fact.learnedAt)
        let learned = "discovery document from \(fact.subject), learned \(Format.duration(age)) ago"
        let stale = age > discoveryLifetime
        let hostDown = unreachable.contains { DoctorProbe.target(hostPort: $0.host)?.label == probe?.label }
        if let failure = probe?.failure, !hostDown {
            return .warning("network.discovery", learned + "; \(probe?.label ?? fact.subject) does not accept connections from here: \(failure)",
                            fix: "Check your network connection, VPN, proxy and DNS.", subject: fact.subject)
        }
        if stale && hostDown {
            return .warning("network.discovery", learned + ": brokerd works from this old copy while the provider is out of reach",
                            fix: "Restore the connection; brokerd fetches a fresh document on its next request.", subject: fact.subject)
        }
        let reach = probe.map { $0.failure == nil ? "; \($0.label) accepts connections" : "" } ?? ""
        return .ok("network.discovery", learned + (stale ? " (refreshed on its next use)" : "") + reach, subject: fact.subject)
    }

    static func clock(_ context: DoctorContext) -> DoctorFinding {
        let id = "clock.skew"
        guard context.status != nil else { return .ok(id, "clock skew: not known while brokerd is not running") }
        guard let skews = context.status?.network?.clockSkew else {
            return .ok(id, "clock skew: this brokerd does not measure it (protocol \(context.status?.protocolVersion ?? "?"))")
        }
        guard let worst = skews.max(by: { abs($0.skewSeconds) < abs($1.skewSeconds) }) else {
            return .ok(id, "clock skew: not measured yet (brokerd has not had an answer from an identity provider)")
        }
        let direction = worst.skewSeconds > 0 ? "behind" : "ahead of"
        let amount = Format.duration(abs(worst.skewSeconds))
        let measured = worst.measuredAt > 0 ? ", measured \(Format.duration(max(0, context.now - worst.measuredAt))) ago" : ""
        let text = "this machine's clock is \(amount) \(direction) \(worst.host)'s (its Date header\(measured))"
        let fix = "Turn on time synchronisation: 'timedatectl set-ntp true' (systemd-timesyncd or chrony), or set the clock."
        if abs(worst.skewSeconds) > clockSkewLimit {
            return .error(id, text + ": tokens will look expired or not yet valid", fix: fix, subject: worst.host)
        }
        if abs(worst.skewSeconds) > 60 { return .warning(id, text, fix: fix, subject: worst.host) }
        return .ok(id, "the clock agrees with \(skews.map(\.host).joined(separator: ", ")) (largest difference \(abs(worst.skewSeconds)) s)")
    }
}
