import BrokerPlatform
import BrokerCache
import BrokerJSON
import BrokerCore
import BrokerProtocol
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Facts about the running daemon that `getStatus` reports alongside the broker's own.
public struct DaemonInfo: Sendable {
    public var socketPath: String
    public var socketActivated: Bool
    public var configPath: String?
    /// Filled in once the D-Bus front end has started (or not): `getStatus.dbusBroker`.
    public let dbusBroker: FrontEndState

    public init(socketPath: String, socketActivated: Bool, configPath: String?, dbusBroker: FrontEndState = FrontEndState()) {
        self.socketPath = socketPath
        self.socketActivated = socketActivated
        self.configPath = configPath
        self.dbusBroker = dbusBroker
    }
}

/// Turns JSON-RPC requests into calls on the broker and the results into JSON. The only place that knows both
/// the wire types (BrokerProtocol) and the broker's model (BrokerCore).
final class RequestRouter: Sendable {
    let broker: Broker
    let apps: AppAccess
    let info: DaemonInfo
    let state: ServerState
    let logger: Logger
    let requestLog: RequestLog

    init(broker: Broker, apps: AppAccess, info: DaemonInfo, state: ServerState, logger: Logger) {
        self.broker = broker
        self.apps = apps
        self.info = info
        self.state = state
        self.logger = logger
        requestLog = RequestLog(logger: logger)
    }

    /// Answers one request: the result or error JSON, or nil for a notification. Logs method, caller, duration
    /// and outcome — never params or results, which may carry secrets.
    func answer(_ request: RPCRequest, from peer: PeerIdentity, caller: CallerIdentity,
                link: ConnectionLink = .detached) async -> [UInt8]? {
        let started = ContinuousClock.now
        let outcome = await dispatch(request, caller: caller, link: link)
        log(request, from: peer, since: started, outcome: outcome)
        guard let id = request.id else { return nil }
        switch outcome {
        case .success(let json): return RPCEnvelope.success(id: id, resultJSON: json)
        case .failure(let error): return RPCEnvelope.failure(id: id, error: error)
        }
    }

    /// One line per request (repeats counted: `RequestLog`): method, caller, duration and outcome — never params or
    /// results, which may carry secrets.
    func log(_ request: RPCRequest, from peer: PeerIdentity, since started: ContinuousClock.Instant,
             outcome: Result<[UInt8], RPCError>) {
        log(method: request.method, from: peer, since: started, outcome: outcome)
    }

    func log(method: String, from peer: PeerIdentity, since started: ContinuousClock.Instant,
             outcome: Result<[UInt8], RPCError>) {
        guard logger.logLevel <= .info else { return }
        let elapsed = ContinuousClock.now - started
        let micros = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        let result: String
        switch outcome {
        case .success: result = "ok"
        case .failure(let error): result = "error \(error.code)"
        }
        requestLog.record(.init(method: method, outcome: result, pid: peer.pid, executable: peer.executable), micros: micros)
    }

    /// A cache hit answered on its connection's thread: counted in the connection's own tally first, so that a
    /// stream of hits takes the shared log's lock once per window, not once per hit.
    func logHit(from peer: PeerIdentity, since started: UInt64, into local: inout RequestLog.Local) {
        guard logger.logLevel <= .info else { return }
        let now = Threads.nowNanoseconds()
        let micros = Int64((now &- started) / 1000)
        if local.countRepeat(micros: micros, at: now, window: requestLog.windowNanoseconds) { return }
        local.record(.init(method: BrokerMethod.acquireTokenSilently.rawValue, outcome: "ok", pid: peer.pid,
                           executable: peer.executable), micros: micros, at: now, into: requestLog)
    }

    /// Methods that hand out or change what every app holds, or tell who holds what: only for a caller identified as
    /// a host process. A sandboxed app could otherwise export every token or grant itself access.
    static let hostOnlyMethods: Set<BrokerMethod> = [.getStatus, .importCache, .exportCache, .signOut, .subscribe, .getApps,
                                                     .setAppAccess, .getAuditLog, .recoverCaches, .resetWaitingCaches,
                                                     .backupCache, .restoreCache]

    private func dispatch(_ request: RPCRequest, caller: CallerIdentity, link: ConnectionLink) async -> Result<[UInt8], RPCError> {
        guard let method = BrokerMethod(rawValue: request.method) else {
            return .failure(RPCError(code: RPCErrorCode.methodNotFound, message: "method not found: \(request.method)"))
        }
        if Self.hostOnlyMethods.contains(method), caller.app.isSandboxed || caller.failure != nil {
            return .failure(RPCError(code: RPCErrorCode.appNotAllowed, message:
                "\(request.method) is for the user's own tools; \(caller.app) may not call it", data: .object(JSONObject([
                    "app": .string(caller.app.description), "reason": .string("hostOnlyMethod")]))))
        }
        // Until the whole cache is loaded, only cache hits are answered (`cachedAnswer`); the rest waits here.
        if method != .getBrokerVersion { await broker.loaded() }
        do {
            switch method {
            case .getBrokerVersion:
                _ = try params(NoParams.self, request)
                return .success(try ProtocolCoding.encode(BrokerVersionResult(
                    version: brokerVersion, protocolVersion: brokerProtocolVersion,
                    methods: BrokerMethod.allCases.map(\.rawValue))))
            case .getStatus:
                _ = try params(NoParams.self, request)
                return .success(try ProtocolCoding.encode(await status()))
            case .getAccounts:
                return .success(try ProtocolCoding.encode(try await accounts(try params(GetAccountsParams.self, request), caller: caller)))
            case .getAccount:
                return .success(try ProtocolCoding.encode(try await account(try params(GetAccountParams.self, request), caller: caller)))
            case .removeAccount:
                return .success(try ProtocolCoding.encode(try await removeAccount(try params(RemoveAccountParams.self, request),
                                                                                  caller: caller)))
            case .signOut:
                let p = try params(SignOutParams.self, request)
                return .success(try ProtocolCoding.encode(Self.wire(try await broker.signOut(Self.selector(p.account)))))
            case .importCache:
                return .success(try ProtocolCoding.encode(try await importCache(try params(ImportCacheParams.self, request))))
            case .exportCache:
                return .success(try ProtocolCoding.encode(try await exportCache(try params(ExportCacheParams.self, request))))
            case .acquireTokenSilently:
                return .success(try await acquireTokenSilently(try params(AcquireTokenSilentlyParams.self, request),
                                                               caller: caller))
            case .acquireTokenInteractively:
                return .success(try await acquireTokenInteractively(try params(AcquireTokenInteractivelyParams.self, request),
                                                                    caller: caller, link: link))
            case .cancelInteractiveFlow:
                let p = try params(CancelInteractiveFlowParams.self, request)
                let canceled = await broker.cancelInteractiveFlow(p.requestId)
                return .success(try ProtocolCoding.encode(CancelInteractiveFlowResult(canceled: canceled)))
            case .subscribe:
                return .success(try await subscribe(try params(SubscribeParams.self, request), link: link))
            case .getApps:
                _ = try params(NoParams.self, request)
                return .success(try ProtocolCoding.encode(try await appList()))
            case .setAppAccess:
                return .success(try ProtocolCoding.encode(try await setAppAccess(try params(SetAppAccessParams.self, request))))
            case .getAuditLog:
                return .success(try ProtocolCoding.encode(try await auditLog(try params(GetAuditLogParams.self, request))))
            case .recoverCaches:
                return .success(try ProtocolCoding.encode(try await recoverCaches(try params(RecoverCachesParams.self, request))))
            case .backupCache:
                return .success(try ProtocolCoding.encode(try await backupCache(try params(BackupCacheParams.self, request))))
            case .restoreCache:
                return .success(try ProtocolCoding.encode(try await restoreCache(try params(BackupCacheParams.self, request))))
            case .resetWaitingCaches:
                _ = try params(NoParams.self, request)
                return .success(try ProtocolCoding.encode(ResetWaitingCachesResult(keptAs: try await broker.giveUpWaitingCaches())))
            }
        } catch let error as RPCError {
            return .failure(error)
        } catch let error as Broker.Failure {
            return .failure(Self.rpcError(error))
        } catch let error as TokenFailure {
            return .failure(Self.rpcError(error))
        } catch let error as CacheBackup.Failure {
            return .failure(RPCError.invalidParams(error.description, reason: Self.reason(error)))
        } catch let error as AccessSettingError {
            return .failure(RPCError.invalidParams(error.description, reason: "nothingPending"))
        } catch {
            return .failure(RPCError(code: RPCErrorCode.brokerInternal, message: "internal error: \(error)"))
        }
    }

    func params<T: Decodable>(_ type: T.Type, _ request: RPCRequest) throws -> T {
        do {
            return try ProtocolCoding.decode(type, from: request.params ?? .object(JSONObject()))
        } catch {
            throw RPCError.invalidParams("invalid params for \(request.method): \(ProtocolCoding.describe(error))")
        }
    }

    static func requireNonEmpty(_ value: String, _ name: String) throws {
        if value.isEmpty { throw RPCError.invalidParams("'\(name)' must not be empty") }
    }

    static func selector(_ reference: AccountReference) throws -> AccountSelector {
        if let text = reference.text {
            try requireNonEmpty(text, "account")
            return .either(text)
        }
        if let id = reference.homeAccountId { return .homeAccountId(id) }
        if let name = reference.username { return .username(name) }
        throw RPCError.invalidParams("an account needs homeAccountId or username")
    }

    private static func rpcError(_ failure: Broker.Failure) -> RPCError {
        switch failure {
        case .lookup(.notFound):
            return RPCError.invalidParams(failure.description, reason: "accountNotFound")
        case .lookup(.ambiguous):
            return RPCError.invalidParams(failure.description, reason: "ambiguousAccount")
        case .invalidDocument:
            return RPCError.invalidParams(failure.description, reason: "invalidCacheDocument")
        case .invalidKey:
            return RPCError.invalidParams(failure.description, reason: "invalidKey")
        case .notPersisted:
            return RPCError(code: RPCErrorCode.brokerInternal, message: failure.description)
        }
    }

    private func status() async -> StatusResult {
        let core = await broker.status()
        let now = broker.now()
        return StatusResult(
            version: brokerVersion, protocolVersion: brokerProtocolVersion, pid: getpid(),
            startedAt: core.startedAt, uptimeSeconds: now - core.startedAt,
            socket: info.socketPath, socketActivated: info.socketActivated, configPath: info.configPath,
            configPresent: info.configPath.map { access($0, F_OK) == 0 } ?? false,
            cachePath: core.cachePath,
            keyStore: KeyStoreInfo(kind: core.keyStore.name, path: { if case .file(let p) = core.keyStore { return p } else { return nil } }(),
                                   location: core.keyStore.location, reason: core.keyStoreReason),
            accounts: core.accounts, accessTokens: core.accessTokens, refreshTokens: core.refreshTokens,
            idTokens: core.idTokens, appMetadata: core.appMetadata, lastWrite: core.lastWrite,
            lastWriteError: core.lastWriteError, problems: core.problems + [apps.problem].compactMap { $0 }, signInRequired: core.signInRequired,
            connections: state.connectionCount, requestsServed: state.requestsServed,
            dbusBroker: info.dbusBroker.description, pendingSignIns: core.pendingSignIns.map(Self.wire),
            pendingConsents: await apps.pendingConsents().map(Self.wire),
            network: NetworkStatus(
                unreachableHosts: core.unreachableHosts.map {
                    UnreachableHost(host: $0.host, reason: $0.why, failures: $0.failures, retryAfter: $0.retryAfter)
                },
                learned: core.learned.map { LearnedFact(kind: $0.kind.rawValue, subject: $0.subject, learnedAt: $0.learnedAt) },
                clockSkew: core.clockSkew.map { HostClockSkew(host: $0.host, skewSeconds: $0.skewSeconds, measuredAt: $0.measuredAt) }),
            waitingCaches: core.waitingCaches)
    }

    // MARK: Core → wire

    static func wire(_ report: RemovalReport) -> RemovalResult {
        RemovalResult(homeAccountId: report.homeAccountId, removedAccessTokens: report.accessTokens,
                      removedRefreshTokens: report.refreshTokens, removedIdTokens: report.idTokens,
                      removedAccounts: report.accounts, familyRefreshTokensKept: report.familyRefreshTokensKept)
    }
}
