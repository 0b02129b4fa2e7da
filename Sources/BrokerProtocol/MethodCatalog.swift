// Which Swift types carry each method's params and result, and each notification's params: the one table the
// server, the clients and the OpenRPC check (docs/openrpc.json) read, so that none of them can drift.

/// A method's wire shape.
public struct MethodSignature {
    public let method: BrokerMethod
    public let params: any Codable.Type
    public let result: any Codable.Type
    /// True for methods that may run for minutes and send notifications (`browserUrl`, `deviceCode`) first.
    public let sendsPrompts: Bool
}

/// A notification's wire shape.
public struct NotificationSignature {
    public let notification: BrokerNotification
    public let params: any Codable.Type
}

extension BrokerMethod {
    public var signature: MethodSignature {
        switch self {
        case .getBrokerVersion: return .init(method: self, params: NoParams.self, result: BrokerVersionResult.self, sendsPrompts: false)
        case .getStatus: return .init(method: self, params: NoParams.self, result: StatusResult.self, sendsPrompts: false)
        case .getAccounts: return .init(method: self, params: GetAccountsParams.self, result: AccountsResult.self, sendsPrompts: false)
        case .getAccount: return .init(method: self, params: GetAccountParams.self, result: AccountResult.self, sendsPrompts: false)
        case .removeAccount: return .init(method: self, params: RemoveAccountParams.self, result: RemovalResult.self, sendsPrompts: false)
        case .signOut: return .init(method: self, params: SignOutParams.self, result: RemovalResult.self, sendsPrompts: false)
        case .importCache: return .init(method: self, params: ImportCacheParams.self, result: ImportResult.self, sendsPrompts: false)
        case .exportCache: return .init(method: self, params: ExportCacheParams.self, result: ExportResult.self, sendsPrompts: false)
        case .acquireTokenSilently:
            return .init(method: self, params: AcquireTokenSilentlyParams.self, result: TokenResult.self, sendsPrompts: false)
        case .acquireTokenInteractively:
            return .init(method: self, params: AcquireTokenInteractivelyParams.self, result: TokenResult.self, sendsPrompts: true)
        case .cancelInteractiveFlow:
            return .init(method: self, params: CancelInteractiveFlowParams.self, result: CancelInteractiveFlowResult.self, sendsPrompts: false)
        case .subscribe: return .init(method: self, params: SubscribeParams.self, result: SubscribeResult.self, sendsPrompts: false)
        case .getApps: return .init(method: self, params: NoParams.self, result: AppsResult.self, sendsPrompts: false)
        case .setAppAccess:
            return .init(method: self, params: SetAppAccessParams.self, result: SetAppAccessResult.self, sendsPrompts: false)
        case .getAuditLog: return .init(method: self, params: GetAuditLogParams.self, result: AuditLogResult.self, sendsPrompts: false)
        case .recoverCaches:
            return .init(method: self, params: RecoverCachesParams.self, result: RecoverCachesResult.self, sendsPrompts: false)
        case .resetWaitingCaches:
            return .init(method: self, params: NoParams.self, result: ResetWaitingCachesResult.self, sendsPrompts: false)
        case .backupCache: return .init(method: self, params: BackupCacheParams.self, result: BackupCacheResult.self, sendsPrompts: false)
        case .restoreCache: return .init(method: self, params: BackupCacheParams.self, result: ImportResult.self, sendsPrompts: false)
        }
    }
}

extension BrokerNotification {
    public var signature: NotificationSignature {
        switch self {
        case .browserUrl: return .init(notification: self, params: BrowserURLNotification.self)
        case .deviceCode: return .init(notification: self, params: DeviceCodeNotification.self)
        case .accountAdded, .accountRemoved, .signInRequired, .statusChanged:
            return .init(notification: self, params: AccountEventNotification.self)
        case .signInPending: return .init(notification: self, params: PendingSignInInfo.self)
        case .signInEnded: return .init(notification: self, params: SignInEndedNotification.self)
        case .consentPending: return .init(notification: self, params: PendingConsentInfo.self)
        case .consentEnded: return .init(notification: self, params: ConsentEndedNotification.self)
        }
    }
}
