import BrokerConfig
import BrokerCore
import BrokerServer
import Logging

/// The configuration file's settings as each part of brokerd takes them (the file's values are checked when read).
extension Brokerd {
    /// The log level: the configuration's (with `--log-level` applied over it, `Flags`), else info.
    static func logLevel(_ configuration: BrokerConfiguration) -> Logger.Level {
        configuration.logLevel.flatMap(Logger.Level.init(rawValue:)) ?? .info
    }

    static func settings(_ configuration: BrokerConfiguration) -> ServerSettings {
        ServerSettings(allowRoot: configuration.allowRoot, maxConnections: configuration.maxConnections,
                       maxConnectionsPerProcess: configuration.maxConnectionsPerProcess,
                       idleTimeout: .seconds(Int64(configuration.idleTimeoutSeconds)),
                       maxInFlightPerConnection: configuration.maxRequestsInFlight,
                       maxBatchSize: configuration.maxBatchSize,
                       lineTimeout: .seconds(Int64(configuration.lineTimeoutSeconds)))
    }

    /// The app policy of the configuration (whose values the configuration has checked).
    static func appSettings(_ configuration: BrokerConfiguration) -> AppPolicySettings {
        AppPolicySettings(
            sandboxedApps: AppPolicySettings.Sandboxed(rawValue: configuration.sandboxedApps) ?? .ask,
            unsandboxedApps: AppPolicySettings.Unsandboxed(rawValue: configuration.unsandboxedApps) ?? .allow,
            pins: configuration.pins.map { AppPin(clientId: $0.clientId, apps: $0.apps.compactMap(AppID.init(parsing:))) },
            consentTimeoutSeconds: configuration.consentTimeoutSeconds)
    }

    static func auditRetention(_ configuration: BrokerConfiguration) -> AppAccess.AuditRetention {
        AppAccess.AuditRetention(days: configuration.auditRetentionDays, maximumRows: configuration.auditMaxRows)
    }

    static func identitySettings(_ configuration: BrokerConfiguration) -> IdPClient.Settings {
        var authorities: [String: String] = [:]
        for name in configuration.profiles.keys.sorted() {
            let profile = configuration.profiles[name]!
            if let authority = profile.authority, authorities[profile.clientId] == nil { authorities[profile.clientId] = authority }
        }
        return IdPClient.Settings(
            caFile: configuration.caFile, allowLoopbackHTTP: configuration.allowLoopbackHTTP,
            requestTimeoutSeconds: Int64(configuration.requestTimeoutSeconds),
            connectTimeoutSeconds: Int64(configuration.connectTimeoutSeconds), defaultAuthority: configuration.defaultAuthority, clientAuthorities: authorities,
            openBrowser: BrowserPolicy(rawValue: configuration.openBrowser.rawValue) ?? .auto,
            interactiveTimeoutSeconds: Int64(configuration.interactiveTimeoutSeconds),
            microsoftBaseURL: configuration.microsoftBaseURL, trustedAuthorityHosts: configuration.trustedAuthorityHosts,
            b2cHosts: configuration.b2cHosts, clientCapabilities: configuration.clientCapabilities)
    }
}
