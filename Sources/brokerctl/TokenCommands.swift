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
        commandName: "login",
        abstract: "Sign in interactively (system browser, or --device-code for machines without one).")
    @OptionGroup var target: TokenTarget
    @Flag(name: .customLong("device-code"), help: "Sign in with a code on another device (RFC 8628) instead of a local browser.")
    var deviceCode = false
    @Option(name: .customLong("login-hint"), help: "The username to preselect.")
    var loginHint: String?
    @Option(help: "The OIDC prompt: login, consent, select_account or none.")
    var prompt: String?
    @OptionGroup var qrCode: QROptions
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let prompt, PromptType(rawValue: prompt) == nil {
            throw ValidationError("--prompt must be login, consent, select_account or none")
        }
    }

    func run() async throws {
        let resolved = try target.resolve()
        let app = connection.application(clientId: resolved.clientId, authority: resolved.authority)
        let promptType = prompt.flatMap(PromptType.init(rawValue:))
        // The prompt goes to standard error, so the QR code goes there too, and by default only when that is a terminal.
        let showsQR = qrCode.shows(on: 2)
        let result = try await withBroker {
            try await app.acquireToken(scopes: resolved.scopes, flow: deviceCode ? .deviceCode : .browser, loginHint: loginHint,
                                       prompt: promptType, onPrompt: { Login.show($0, qr: showsQR) })
        }
        if output.json { return try printJSON(result.wire) }
        print("Signed in as \(result.account.username.isEmpty ? "(no username)" : result.account.username) "
              + "(\(result.account.identifier)) for \(resolved.clientId).")
    }

    /// What the user must do, on stderr (stdout stays for the result). A device code's address may also be shown as
    /// a QR code, written with the message at once so that a reader of the stream never sees half of it.
    @Sendable static func show(_ prompt: InteractivePrompt, qr: Bool) {
        switch prompt {
        case .openBrowser(let url, _):
            printError("To sign in, open this address in a browser (brokerd also tries to open it):\n\n  \(url)\n")
        case .deviceCode(_, let verificationURI, _, let message, _):
            let code = qr ? TerminalQR.text(for: verificationURI) : nil
            printError(message + (code.map { "\n\n" + $0 + "\n" } ?? ""))
        }
    }
}

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
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
        let app = connection.application(clientId: resolved.clientId, authority: resolved.authority, oneShot: true)
        let chosen: BrokerAccount
        if let account {
            let found = try await withBroker { () async throws -> BrokerAccount? in
                if let byId = try await app.account(forIdentifier: account) { return byId }
                return try await app.account(forUsername: account)
            }
            guard let found else {
                printError("brokerctl: no account '\(account)' is signed in for \(resolved.clientId).")
                printError("hint: brokerctl login \(target.profile ?? "--client-id \(resolved.clientId) --scope …")")
                throw ExitCode(ExitStatus.interactionRequired)
            }
            chosen = found
        } else {
            let visible = try await withBroker { try await app.allAccounts() }
            guard let only = visible.first else {
                printError("brokerctl: no account is signed in for \(resolved.clientId).")
                printError("hint: brokerctl login \(target.profile ?? "--client-id \(resolved.clientId) --scope …")")
                throw ExitCode(ExitStatus.interactionRequired)
            }
            guard visible.count == 1 else {
                printError("brokerctl: \(visible.count) accounts are signed in for \(resolved.clientId); choose one with --account "
                           + "(\(visible.map { $0.username.isEmpty ? $0.identifier : $0.username }.joined(separator: ", "))).")
                throw ExitCode(ExitStatus.failed)
            }
            chosen = only
        }
        let result = try await withBroker {
            try await app.acquireTokenSilent(scopes: resolved.scopes, account: chosen, forceRefresh: forceRefresh)
        }
        if output.json { return try printJSON(result.wire) }
        print(result.accessToken)
    }
}
