import BrokerCore
import BrokerPlatform
import Logging
import Systemd

/// What tells the broker that the network may be back, so that hosts backing off are tried again and waiting
/// background refreshes run at once: rtnetlink (a link, an address or a route appeared), logind's resume from
/// suspend and NetworkManager's "connected" on the system bus. Either may be missing (a container without a system
/// bus): the backoffs then simply run out.
struct NetworkWatch {
    private let routes: NetworkChanges?
    private let systemBus: SystemEvents?

    static func start(_ broker: Broker, logger: Logger) -> NetworkWatch {
        let routes = NetworkChanges.watch {
            Task { await broker.networkChanged("a link, address or route appeared") }
        }
        if routes == nil { logger.notice("network changes are not watched: no rtnetlink socket") }
        let systemBus: SystemEvents?
        switch SystemEvents.watch({ event in
            Task { await broker.networkChanged(event == .resumed ? "resumed from suspend" : "NetworkManager connected") }
        }, startThread: { PlatformThread.detach($0) }) {
        case .success(let watcher): systemBus = watcher
        case .failure(let failure):
            systemBus = nil
            logger.info("resume and NetworkManager are not watched: \(failure)")
        }
        return NetworkWatch(routes: routes, systemBus: systemBus)
    }

    func stop() {
        routes?.stop()
        systemBus?.stop()
    }
}
