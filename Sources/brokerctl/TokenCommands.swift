import ArgumentParser
import BrokerClient
import BrokerConfig
import BrokerProtocol

/// Which app, authority and scopes a token command is for: a profile of the config file, overridable by flags.
struct TokenTarget: ParsableArguments {
    @Argument(help: "A profile of the config file ([profile.NAME]: client_id, authority, scopes).")
    var profile: String?
    @Option(name: .customLong("client-id"), help: "The app (client id); overrides the profile's.")
    var clientId: String?
    @Option(help: "The authority (https://host/tenant); overrides the profile's.")
    var authority: String?
    @Option(name: .customLong("scope"), help: "A scope to ask for (repeatable); overrides the profile's scopes.")
    var scopes: [String] = []
    @Option(help: ArgumentHelp("Configuration file with the profiles (default: $XDG_CONFIG_HOME/brokerd/config.toml).",
                               valueName: "file"))
    var config: String?

    struct Resolved {
        var clientId: String
        var authority: String?
        var scopes: [String]
    }

    func resolve() throws -> Resolved {
        var resolved = Resolved(clientId: "", authority: nil, scopes: [])
        if let profile {
            let path = config ?? BrokerConfiguration.defaultPath()
            let configuration: BrokerConfiguration
            do { configuration = try BrokerConfiguration.load(path: path, required: config != nil) } catch {
                printError("brokerctl: \(error)")
                throw ExitCode(ExitStatus.failed)
            }
            guard let found = configuration.profiles[profile] else {
                let known = configuration.profiles.keys.sorted()
                printError("brokerctl: no profile '\(profile)' in \(path)"
                           + (known.isEmpty ? "" : " (profiles: \(known.joined(separator: ", ")))"))
                throw ExitCode(ExitStatus.failed)
            }
            resolved = Resolved(clientId: found.clientId, authority: found.authority, scopes: found.scopes)
        }
        if let clientId { resolved.clientId = clientId }
        if let authority { resolved.authority = authority }
        if !scopes.isEmpty { resolved.scopes = scopes }
        guard !resolved.clientId.isEmpty else {
            throw ValidationError("name a PROFILE or pass --client-id")
        }
        guard !resolved.scopes.isEmpty else { throw ValidationError("no scopes: pass --scope or set scopes in the profile") }
        return resolved
    }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign in interactively (system browser, or --device-code for machines without one).")
    @OptionGroup var target: TokenTarget
    @Flag(name: .customLong("device-code"), help: "Sign in with a code on another device (RFC 8628) instead of a local browser.")
    var deviceCode = false
    @Option(name: .customLong("login-hint"), help: "The username to preselect.")
    var loginHint: String?
    @Option(help: "The OIDC prompt: login, consent, select_account or none.")
    var prompt: String?
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let resolved = try target.resolve()
        let params = AcquireTokenInteractivelyParams(
            clientId: resolved.clientId, authority: resolved.authority, scopes: resolved.scopes, loginHint: loginHint,
            prompt: prompt, flow: deviceCode ? "deviceCode" : "browser")
        let result = try await withBroker {
            try await connection.connect().call(.acquireTokenInteractively, params, as: TokenResult.self,
                                                timeoutSeconds: 3600) { method, params in
                Login.show(method, params)
            }
        }
        if output.json { return try printJSON(result) }
        print("Signed in as \(result.account.username.isEmpty ? "(no username)" : result.account.username) "
              + "(\(result.account.homeAccountId)) for \(resolved.clientId).")
    }

    /// What the user must do, on stderr (stdout stays for the result).
    static func show(_ method: String, _ params: [UInt8]) {
        switch BrokerNotification(rawValue: method) {
        case .browserUrl:
            if let note = try? ProtocolCoding.decode(BrowserURLNotification.self, from: params) {
                printError("To sign in, open this address in a browser (brokerd also tries to open it):\n\n  \(note.url)\n")
            }
        case .deviceCode:
            if let note = try? ProtocolCoding.decode(DeviceCodeNotification.self, from: params) {
                printError(note.message)
            }
        default:
            break
        }
    }
}

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an access token (refreshed when needed) on standard output, for scripts.",
        discussion: "Exit status 4 when the account must sign in again: run 'brokerctl login' with the same profile.")
    @OptionGroup var target: TokenTarget
    @Option(help: "homeAccountId or username; needed only when the app has several accounts.")
    var account: String?
    @Flag(name: .customLong("force-refresh"), help: "Ignore the cached access token and redeem the refresh token.")
    var forceRefresh = false
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let resolved = try target.resolve()
        let broker = connection.connect()
        let chosen: String
        if let account {
            chosen = account
        } else {
            let visible = try await withBroker {
                try await broker.call(.getAccounts, GetAccountsParams(clientId: resolved.clientId), as: AccountsResult.self)
            }.accounts
            guard let only = visible.first else {
                printError("brokerctl: no account is signed in for \(resolved.clientId).")
                printError("hint: brokerctl login \(target.profile ?? "--client-id \(resolved.clientId) --scope …")")
                throw ExitCode(ExitStatus.interactionRequired)
            }
            guard visible.count == 1 else {
                printError("brokerctl: \(visible.count) accounts are signed in for \(resolved.clientId); choose one with --account "
                           + "(\(visible.map { $0.username.isEmpty ? $0.homeAccountId : $0.username }.joined(separator: ", "))).")
                throw ExitCode(ExitStatus.failed)
            }
            chosen = only.homeAccountId
        }
        let params = AcquireTokenSilentlyParams(clientId: resolved.clientId, authority: resolved.authority,
                                                scopes: resolved.scopes, account: AccountReference(chosen),
                                                forceRefresh: forceRefresh ? true : nil)
        let result = try await withBroker { try await broker.call(.acquireTokenSilently, params, as: TokenResult.self) }
        if output.json { return try printJSON(result) }
        print(result.accessToken)
    }
}
