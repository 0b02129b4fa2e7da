import BrokerCache
import BrokerJSON
import BrokerCore
import BrokerPlatform
import BrokerProtocol

/// The account methods and the cache's import and export, as `dispatch` calls them.
extension RequestRouter {
    func accounts(_ p: GetAccountsParams, caller: CallerIdentity) async throws -> AccountsResult {
        guard try mayList(caller, clientId: p.clientId) else { return AccountsResult(accounts: []) }
        var summaries = await broker.accounts(visibleTo: p.clientId)
        if let clientId = p.clientId { summaries = apps.visible(summaries, to: caller, clientId: clientId) }
        return AccountsResult(accounts: summaries.map(SocketWire.account))
    }

    func account(_ p: GetAccountParams, caller: CallerIdentity) async throws -> AccountResult {
        let selector: AccountSelector
        switch (p.homeAccountId, p.username) {
        case (let id?, _): selector = .homeAccountId(id)
        case (nil, let name?): selector = .username(name)
        case (nil, nil): throw RPCError.invalidParams("getAccount needs homeAccountId or username")
        }
        guard try mayList(caller, clientId: p.clientId) else { return AccountResult(account: nil) }
        let account = try await broker.account(selector, visibleTo: p.clientId)
            .flatMap { apps.visible([$0], to: caller, clientId: p.clientId).first }
        return AccountResult(account: account.map(SocketWire.account))
    }

    func removeAccount(_ p: RemoveAccountParams, caller: CallerIdentity) async throws -> RemovalResult {
        try Self.requireNonEmpty(p.clientId, "clientId")
        let selector = try Self.selector(p.account)
        try await authorize(caller, clientId: p.clientId, account: await accountNames(selector, clientId: p.clientId), scopes: [])
        return Self.wire(try await broker.removeAccount(selector, forClient: p.clientId))
    }

    func importCache(_ p: ImportCacheParams) async throws -> ImportResult {
        guard p.format == "msal" else {
            throw RPCError.invalidParams("unsupported cache format '\(p.format)' (supported: msal)", reason: "unsupportedFormat")
        }
        let bytes: [UInt8]
        switch (p.data, p.path) {
        case (let data?, nil): bytes = Array(data.utf8)
        case (nil, let path?): bytes = try CallerFiles.read(path)
        default: throw RPCError.invalidParams("importCache takes exactly one of 'data' and 'path'")
        }
        let report = try await broker.importCache(bytes)
        ProcessMemory.trim()  // the document and its parse were transient
        return ImportResult(added: report.added, replaced: report.replaced, keptNewer: report.keptNewer, accounts: report.accounts)
    }

    func exportCache(_ p: ExportCacheParams) async throws -> ExportResult {
        guard (p.format ?? "msal") == "msal" else {
            throw RPCError.invalidParams("unsupported cache format '\(p.format ?? "")' (supported: msal)", reason: "unsupportedFormat")
        }
        guard let path = p.path else {
            return ExportResult(format: "msal", data: String(decoding: await broker.exportCache(), as: UTF8.self))
        }
        let document = await broker.exportDocument()
        let bytes = try CallerFiles.write(path) { sink in
            try document.serialize(indent: 4, excludingSections: [BrokerState.sectionName], into: sink)
        }
        ProcessMemory.trim()
        return ExportResult(format: "msal", path: path, bytes: bytes)
    }

    func recoverCaches(_ p: RecoverCachesParams) async throws -> RecoverCachesResult {
        var key: [UInt8]?
        if let text = p.key {
            guard let bytes = Base64URL.decode(text) else {
                throw RPCError.invalidParams("'key' is not base64url", reason: "invalidKey")
            }
            key = bytes
        }
        let recovery: Broker.Recovery
        do { recovery = try await broker.recoverWaitingCaches(key: key, database: p.database) } catch let error as FileError {
            throw RPCError.invalidParams("the database to recover: \(error)", reason: "invalidDatabase")
        }
        ProcessMemory.trim()  // the databases read were transient
        return RecoverCachesResult(
            merged: recovery.merged.map { MergedCache(file: $0.file, added: $0.report.added, replaced: $0.report.replaced,
                                                      keptNewer: $0.report.keptNewer) },
            waiting: recovery.waiting, problems: recovery.problems)
    }

    func backupCache(_ p: BackupCacheParams) async throws -> BackupCacheResult {
        try CallerFiles.requireAbsolute(p.path)
        let document = await broker.exportCache()
        let sealed = try CacheBackup.seal(document, passphrase: p.passphrase)
        let bytes = try CallerFiles.write(p.path) { sink in try sink(sealed) }
        ProcessMemory.trim()  // the document and scrypt's memory were transient
        return BackupCacheResult(path: p.path, bytes: bytes, accounts: await broker.status().accounts)
    }

    func restoreCache(_ p: BackupCacheParams) async throws -> ImportResult {
        let document = try CacheBackup.open(try CallerFiles.read(p.path), passphrase: p.passphrase)
        let report = try await broker.importCache(document)
        ProcessMemory.trim()
        return ImportResult(added: report.added, replaced: report.replaced, keptNewer: report.keptNewer, accounts: report.accounts)
    }

    static func reason(_ failure: CacheBackup.Failure) -> String {
        switch failure {
        case .notABackup: return "notABackup"
        case .unsupportedVersion: return "unsupportedBackupVersion"
        case .tooCostly: return "backupTooCostly"
        case .wrongPassphrase: return "wrongPassphrase"
        case .passphraseTooShort: return "passphraseTooShort"
        }
    }
}
