#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection from brokerctl itself to each identity provider host: whether the network lets this
/// machine reach it now, apart from what brokerd last saw. Every connection is attempted at once and bounded
/// together, so that doctor waits at most `timeoutSeconds` however many hosts there are.
enum DoctorProbe {
    struct Target: Hashable, Sendable {
        var host: String
        var port: UInt16
        var label: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// `https://host[:port]/…` → host and port (443 for https, 80 for http).
    static func target(url: String) -> Target? {
        let scheme: String, rest: Substring
        if let range = url.firstRange(of: "://") {
            scheme = url[..<range.lowerBound].lowercased()
            rest = url[range.upperBound...]
        } else {
            scheme = "https"
            rest = Substring(url)
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return target(hostPort: String(authority), defaultPort: scheme == "http" ? 80 : 443)
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port`.
    static func target(hostPort: String, defaultPort: UInt16 = 443) -> Target? {
        var host = Substring(hostPort), port = defaultPort
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") { port = UInt16(after.dropFirst()) ?? defaultPort }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            port = UInt16(host[host.index(after: colon)...]) ?? defaultPort
            host = host[..<colon]
        }
        return host.isEmpty ? nil : Target(host: host.lowercased(), port: port)
    }

    /// nil when a connection was made; else why none could be.
    static func connectAll(_ targets: [Target], timeoutSeconds: Double = 3) -> [Target: String?] {
        var results: [Target: String?] = [:]
        var attempts: [(target: Target, fd: Int32)] = []
        for target in Set(targets) {
            switch resolve(target) {
            case .failure(let reason): results[target] = .some(reason)
            case .success(let addresses):
                var started = false
                var lastError = "no address"
                for address in addresses {
                    switch begin(address) {
                    case .success(let fd): attempts.append((target, fd)); started = true
                    case .failure(let reason): lastError = reason
                    }
                }
                if !started { results[target] = .some(lastError) }
            }
        }
        wait(for: &attempts, into: &results, deadline: DoctorSystem.monotonicSeconds() + timeoutSeconds)
        for attempt in attempts { close(attempt.fd) }
        for attempt in attempts where results[attempt.target] == nil {
            results[attempt.target] = .some("no answer within \(Int(timeoutSeconds)) s")
        }
        return results
    }

    private static func wait(for attempts: inout [(target: Target, fd: Int32)], into results: inout [Target: String?],
                             deadline: Double) {
        var failures: [Target: String] = [:]
        while !attempts.isEmpty {
            let left = deadline - DoctorSystem.monotonicSeconds()
            if left <= 0 { break }
            var polled = attempts.map { pollfd(fd: $0.fd, events: Int16(POLLOUT), revents: 0) }
            if poll(&polled, nfds_t(polled.count), Int32(left * 1000) + 1) < 0 && errno != EINTR { break }
            var finished: Set<Int32> = []
            for (index, entry) in polled.enumerated() where entry.revents != 0 {
                let target = attempts[index].target
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(entry.fd, SOL_SOCKET, SO_ERROR, &error, &length)
                if error == 0 { results[target] = .some(nil) } else { failures[target] = DoctorSystem.errorText(error) }
                finished.insert(entry.fd)
            }
            for fd in finished { close(fd) }
            attempts.removeAll { finished.contains($0.fd) || results[$0.target] != nil }
            for (target, reason) in failures where results[target] == nil && !attempts.contains(where: { $0.target == target }) {
                results[target] = .some(reason)
            }
        }
        for attempt in attempts where results[attempt.target] == nil {
            if let reason = failures[attempt.target] { results[attempt.target] = .some(reason) }
        }
    }

    private enum Outcome<Value> {
        case success(Value)
        case failure(String)
    }

    private static func resolve(_ target: Target) -> Outcome<[[UInt8]]> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(target.host, String(target.port), &hints, &list)
        guard status == 0, let list else { return .failure("cannot resolve \(target.host): \(String(cString: gai_strerror(status)))") }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var next: UnsafeMutablePointer<addrinfo>? = list
        while let entry = next {
            if let address = entry.pointee.ai_addr {
                let raw = UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen))
                addresses.append(Array(raw))
            }
            next = entry.pointee.ai_next
        }
        return .success(addresses)
    }

    /// A non-blocking connect under way (or already made).
    private static func begin(_ address: [UInt8]) -> Outcome<Int32> {
        let family = address.withUnsafeBytes { $0.load(as: sa_family_t.self) }
        let fd = socket(Int32(family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(DoctorSystem.errorText()) }
        let status = address.withUnsafeBytes {
            connect(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count))
        }
        if status == 0 || errno == EINPROGRESS { return .success(fd) }
        let reason = DoctorSystem.errorText()
        close(fd)
        return .failure(reason)
    }
}
