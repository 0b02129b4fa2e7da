import BrokerJSON
import BrokerProtocol

/// The broker as a whole, for tools that manage it (brokerctl, settings panels): status, every account, signing an
/// account out everywhere, cache import and export, events. Apps use `PublicClientApplication`.
public final class BrokerControl: Sendable {
    let connection: BrokerConnection

    public init(socketPath: String? = nil) {
        connection = BrokerConnection(socketPath: socketPath, checkProtocolVersion: true)
    }

    public var socketPath: String { connection.socketPath }

    /// Closes the connection to brokerd now; a later call reopens it.
    public func close() async {
        await connection.disconnect()
    }

    /// brokerd's version, protocol version and methods. Works with any protocol version (on a connection that
    /// skips the version check).
    public func version() async throws(BrokerError) -> BrokerVersionResult {
        let unchecked = BrokerConnection(socketPath: connection.socketPath)
        do { return try await unchecked.call(.getBrokerVersion, as: BrokerVersionResult.self) } catch { throw BrokerError(error) }
    }

    public func status() async throws(BrokerError) -> StatusResult {
        try await call(.getStatus, NoParams(), as: StatusResult.self)
    }

    /// Every account, or those `clientId` can see.
    public func accounts(clientId: String? = nil) async throws(BrokerError) -> [Account] {
        try await call(.getAccounts, GetAccountsParams(clientId: clientId), as: AccountsResult.self).accounts
    }

    /// Removes an account (named by home account id or username) from one app; see `PublicClientApplication.remove`.
    public func remove(_ account: String, clientId: String) async throws(BrokerError) -> RemovalResult {
        try await call(.removeAccount, RemoveAccountParams(clientId: clientId, account: AccountReference(account)),
                       as: RemovalResult.self)
    }

    /// Signs the account out everywhere: every token of every app, and the account.
    public func signOut(_ account: String) async throws(BrokerError) -> RemovalResult {
        try await call(.signOut, SignOutParams(account: AccountReference(account)), as: RemovalResult.self)
    }

    /// Merges an MSAL unified cache document (JSON text) into the broker's cache.
    public func importCache(_ document: String) async throws(BrokerError) -> ImportResult {
        try await call(.importCache, ImportCacheParams(data: document), as: ImportResult.self)
    }

    /// Merges the MSAL document in `path` (absolute, a file of this user), which brokerd reads itself: any size.
    public func importCache(fromFile path: String) async throws(BrokerError) -> ImportResult {
        try await call(.importCache, ImportCacheParams(path: path), as: ImportResult.self)
    }

    /// The broker's cache as an MSAL unified cache document (JSON text with refresh tokens: keep it private).
    public func exportCache() async throws(BrokerError) -> String {
        let result = try await call(.exportCache, ExportCacheParams(), as: ExportResult.self)
        guard let data = result.data else { throw .internal(OAuthErrorDetail(message: "brokerd sent no document", code: RPCErrorCode.brokerInternal)) }
        return data
    }

    /// Writes the MSAL document to `path` (absolute; mode 0600, replaced atomically), brokerd writing it itself: any
    /// size. Returns the number of bytes written.
    public func exportCache(toFile path: String) async throws(BrokerError) -> Int {
        try await call(.exportCache, ExportCacheParams(path: path), as: ExportResult.self).bytes ?? 0
    }

    /// Broker events (`accountAdded`, `accountRemoved`, `signInRequired`, `statusChanged`, `signInPending`,
    /// `signInEnded`) as they happen. The sequence ends with an error when brokerd stops.
    public func events(_ names: [BrokerNotification]? = nil) async throws(BrokerError)
        -> AsyncThrowingStream<BrokerEvent, Error> {
        if let prompt = names?.first(where: { !BrokerNotification.events.contains($0) }) {
            throw .invalidRequest(OAuthErrorDetail(message: "\(prompt.rawValue) is a prompt of a sign-in, not an event",
                                                   code: RPCErrorCode.invalidParams))
        }
        let raw: AsyncThrowingStream<(method: String, params: [UInt8]), Error>
        do { raw = try await connection.events(names?.map(\.rawValue)) } catch { throw BrokerError(error) }
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await (method, params) in raw {
                        guard let kind = BrokerNotification(rawValue: method), let event = BrokerEvent(kind, params) else { continue }
                        continuation.yield(event)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: BrokerError(error))
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Every app brokerd has seen or holds a grant, denial or pin for.
    public func apps() async throws(BrokerError) -> [AppInfo] {
        try await call(.getApps, NoParams(), as: AppsResult.self).apps
    }

    /// Answers a waiting consent or sets an app's access ahead of time: `allow`, `allowOnce`, `deny` or `revoke` (every
    /// client ID of the app when `clientId` is nil).
    public func setAppAccess(_ params: SetAppAccessParams) async throws(BrokerError) -> SetAppAccessResult {
        try await call(.setAppAccess, params, as: SetAppAccessResult.self)
    }

    /// The newest audit rows that pass the filter, newest first.
    public func auditLog(_ params: GetAuditLogParams) async throws(BrokerError) -> [AuditEntry] {
        try await call(.getAuditLog, params, as: AuditLogResult.self).entries
    }

    /// Tries the cache databases waiting for their keys again (the key store's key, read afresh, and `key`, 32 bytes
    /// the user holds), merging each that opens; `database`: a file to wait for first.
    public func recoverCaches(key: [UInt8]? = nil, database: String? = nil) async throws(BrokerError) -> RecoverCachesResult {
        try await call(.recoverCaches, RecoverCachesParams(key: key.map { Base64URL.encode($0) }, database: database),
                       as: RecoverCachesResult.self)
    }

    /// Gives up the databases waiting for their keys; each is kept as a file that `recoverCaches` can still open.
    public func resetWaitingCaches() async throws(BrokerError) -> [String] {
        try await call(.resetWaitingCaches, NoParams(), as: ResetWaitingCachesResult.self).keptAs
    }

    /// Writes the whole cache to `path` (absolute), sealed under `passphrase`.
    public func backupCache(to path: String, passphrase: String) async throws(BrokerError) -> BackupCacheResult {
        try await call(.backupCache, BackupCacheParams(path: path, passphrase: passphrase), as: BackupCacheResult.self)
    }

    /// Merges a backup written by `backupCache` into the cache, as an import.
    public func restoreCache(from path: String, passphrase: String) async throws(BrokerError) -> ImportResult {
        try await call(.restoreCache, BackupCacheParams(path: path, passphrase: passphrase), as: ImportResult.self)
    }

    func call<Params: Encodable & Sendable, Result: Decodable & Sendable>(_ method: BrokerMethod, _ params: Params,
                                                    as type: Result.Type) async throws(BrokerError) -> Result {
        do { return try await connection.call(method, params, as: type) } catch { throw BrokerError(error) }
    }
}

/// Something that happened in the broker.
public struct BrokerEvent: Sendable, Equatable {
    public var kind: BrokerNotification
    public var homeAccountId: String?
    /// Set on `signInRequired`, on a removal from one app, and on the sign-in events.
    public var clientId: String?
    /// `signInPending`: the sign-in waiting for the user (its code and where to enter it).
    public var signIn: PendingSignInInfo?
    /// `signInEnded`: the request id of the sign-in and how it ended (completed, cancelled, expired, failed).
    public var requestId: String?
    public var outcome: String?
    /// `consentPending`: the app waiting for the user's answer. `consentEnded` carries its app and consent id too.
    public var consent: PendingConsentInfo?

    init(kind: BrokerNotification, homeAccountId: String? = nil, clientId: String? = nil) {
        self.kind = kind
        self.homeAccountId = homeAccountId
        self.clientId = clientId
    }

    /// The event from a notification's params; nil when they do not fit its kind.
    init?(_ kind: BrokerNotification, _ params: [UInt8]) {
        self.init(kind: kind)
        switch kind {
        case .signInPending:
            guard let body = try? ProtocolCoding.decode(PendingSignInInfo.self, from: params) else { return nil }
            (signIn, clientId, requestId) = (body, body.clientId, body.requestId)
        case .signInEnded:
            guard let body = try? ProtocolCoding.decode(SignInEndedNotification.self, from: params) else { return nil }
            (clientId, requestId, outcome) = (body.clientId, body.requestId, body.outcome)
        case .consentPending:
            guard let body = try? ProtocolCoding.decode(PendingConsentInfo.self, from: params) else { return nil }
            (consent, clientId) = (body, body.clientId)
        case .consentEnded:
            guard let body = try? ProtocolCoding.decode(ConsentEndedNotification.self, from: params) else { return nil }
            consent = PendingConsentInfo(consentId: body.consentId, app: body.app, executable: nil, clientId: body.clientId,
                                         frontEnd: "", since: 0, expiresOn: 0, waiting: 0)
            (clientId, outcome) = (body.clientId, body.outcome)
        default:
            guard let body = try? ProtocolCoding.decode(AccountEventNotification.self, from: params) else { return nil }
            (homeAccountId, clientId) = (body.homeAccountId, body.clientId)
        }
    }
}
