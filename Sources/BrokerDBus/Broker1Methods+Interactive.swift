import BrokerCache
import BrokerCore
import BrokerJSON
import Synchronization

/// Broker request ids of the sign-ins running for D-Bus callers.
final class RunningFlows: Sendable {
    private let ids = Mutex<Set<String>>([])
    func add(_ id: String) { ids.withLock { _ = $0.insert(id) } }
    func remove(_ id: String) { ids.withLock { _ = $0.remove(id) } }
    func all() -> [String] { ids.withLock { Array($0) } }
}

extension Broker1Methods {
    /// `authorizationType` 6: `username` is the login hint and `decodedClaims` the claims. The sign-in UI is the
    /// broker's (the system browser and the loopback redirect, as for the socket API): D-Bus callers have no channel
    /// for prompts. A sign-in still running when `interactiveLimit` is reached is cancelled and answered UserCanceled.
    func interactiveToken(_ params: JSONObject, correlationId: String) async -> JSONValue {
        guard let auth = params["authParameters"]?.objectValue, let clientId = auth["clientId"]?.stringValue,
              !clientId.isEmpty else {
            return Self.tokenError(status: .apiContractViolation, tag: 0x6272_0030, context: "authParameters.clientId is missing")
        }
        func text(_ key: String) -> String? { auth[key]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } }
        let request = InteractiveTokenRequest(
            clientId: clientId, authority: text("authority"),
            scopes: auth["requestedScopes"]?.arrayValue?.compactMap(\.stringValue) ?? [],
            loginHint: text("username"), claims: text("decodedClaims"), flow: .browser)
        let started = Mutex<String?>(nil)
        let flows = self.flows, broker = self.broker, logger = self.logger
        let deadline = Task {
            try await Task.sleep(for: interactiveLimit)
            guard let id = started.withLock({ $0 }) else { return }
            logger.notice("D-Bus sign-in ran out of time; cancelled", metadata: ["client_id": "\(clientId)"])
            _ = await broker.cancelInteractiveFlow(id)
        }
        defer {
            deadline.cancel()
            if let id = started.withLock({ $0 }) { flows.remove(id) }
        }
        do {
            let outcome = try await broker.acquireTokenInteractively(request) { prompt in
                let id: String
                switch prompt {
                case .browser(let requestId, _): id = requestId
                case .deviceCode(let requestId, _, _, _, _): id = requestId
                }
                started.withLock { $0 = id }
                flows.add(id)
            }
            return Self.tokenResponse(outcome, correlationId: correlationId)
        } catch {
            return Self.tokenError(error)
        }
    }
}
