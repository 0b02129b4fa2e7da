import BrokerPlatform

/// How another front end of the same broker is doing, as `getStatus` reports it: nil while it is off, else a
/// sentence ("serving …", "not serving: …"). Set by the daemon's wiring, read by the router.
public final class FrontEndState: Sendable {
    private let state = Locked<String?>(nil)

    public init() {}

    public var description: String? { state.withLock { $0 } }

    public func set(_ description: String?) { state.withLock { $0 = description } }
}
