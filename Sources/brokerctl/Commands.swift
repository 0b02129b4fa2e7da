import ArgumentParser
import BrokerClient
import BrokerProtocol

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the daemon: socket, cache file, key store, accounts, tokens, problems.")
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let status = try await withBroker { try await connection.control().status() }
        if output.json { return try printJSON(status) }
        print(Format.status(status))
    }
}

struct Accounts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "List accounts, their tenants, and the apps holding tokens for them (never the tokens).")
    @Option(name: .customLong("client-id"), help: "Only accounts this app (client id) can see.")
    var clientId: String?
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let result = try await withBroker {
            try await connection.control().accounts(clientId: clientId)
        }
        if output.json { return try printJSON(AccountsResult(accounts: result)) }
        print(Format.accounts(result, now: Format.now()))
    }
}

struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove an account from one app: its tokens go and the account is hidden from it; other apps keep single sign-on.")
    @Argument(help: "homeAccountId or username of the account.")
    var account: String
    @Option(name: .customLong("client-id"), help: "The app (client id) to remove the account from.")
    var clientId: String
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let result = try await withBroker {
            try await connection.control().remove(account, clientId: clientId)
        }
        if output.json { return try printJSON(result) }
        var line = "Removed \(result.homeAccountId) from \(clientId): \(result.removedRefreshTokens) refresh, "
            + "\(result.removedAccessTokens) access, \(result.removedIdTokens) id token(s)."
        if result.familyRefreshTokensKept > 0 {
            line += " Kept \(result.familyRefreshTokensKept) family refresh token(s) for the app's FOCI siblings."
        }
        print(line)
    }
}

struct SignOut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signout",
        abstract: "Sign an account out everywhere: every token of every app, and the account itself.")
    @Argument(help: "homeAccountId or username of the account.")
    var account: String
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let result = try await withBroker {
            try await connection.control().signOut(account)
        }
        if output.json { return try printJSON(result) }
        print("Signed out \(result.homeAccountId): \(result.removedRefreshTokens) refresh, \(result.removedAccessTokens) access, "
              + "\(result.removedIdTokens) id token(s) and \(result.removedAccounts) account entr\(result.removedAccounts == 1 ? "y" : "ies") removed.")
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Merge an MSAL token cache (Azure CLI's msal_token_cache.json, msal-python's serialized cache) into the broker.")
    @Argument(help: "The cache file, or - for standard input.")
    var file: String
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let result: ImportResult
        if file == "-" {
            // Standard input travels in the message (1 MiB at most); a file of any size is read by brokerd itself.
            let bytes: [UInt8]
            do { bytes = try LocalFile.read(file) } catch {
                printError("brokerctl: \(error)")
                throw ExitCode(ExitStatus.failed)
            }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                printError("brokerctl: standard input is not UTF-8 text")
                throw ExitCode(ExitStatus.failed)
            }
            result = try await withBroker { try await connection.control().importCache(text) }
        } else {
            let path = LocalFile.absolute(file)
            result = try await ProgressLine.while("importing \(file)") {
                try await withBroker { try await connection.control().importCache(fromFile: path) }
            }
        }
        if output.json { return try printJSON(result) }
        print("Imported \(file): \(result.added) new, \(result.replaced) replaced, \(result.keptNewer) kept (the broker's were newer); "
              + "\(result.accounts) account entr\(result.accounts == 1 ? "y" : "ies").")
    }
}

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the broker's cache as an MSAL unified cache document (readable by msal-python, MSAL.NET, Azure CLI).",
        discussion: """
            The file holds every secret (refresh, access and id tokens) in clear text: it is created with mode 0600. \
            It is for handing the cache to an MSAL SDK; to keep a copy, use `brokerctl backup`, which seals it under \
            a passphrase. brokerd writes it itself (any size), into a directory of your user (or a sticky one such as \
            /tmp), replacing the file atomically.
            """)
    @Argument(help: "The file to write, or - for standard output.")
    var file: String
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        if file == "-" {
            let document = try await withBroker { try await connection.control().exportCache() }
            do { try LocalFile.write(file, Array(document.utf8)) } catch {
                printError("brokerctl: \(error)")
                throw ExitCode(ExitStatus.failed)
            }
            return
        }
        let path = LocalFile.absolute(file)
        let bytes = try await ProgressLine.while("exporting to \(file)") {
            try await withBroker { try await connection.control().exportCache(toFile: path) }
        }
        print("Exported the cache to \(file) (\(bytes) bytes, mode 0600).")
    }
}

struct Version: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version", abstract: "Show the versions of brokerctl and of the running brokerd.",
        discussion: """
            Answers without brokerd too (exit status 0): brokerctl's version, and brokerd's when it runs. --json prints \
            {"brokerctl": {"version", "protocolVersion"}, "brokerd": {"version", "protocolVersion", "methods"}}, \
            "brokerd" absent when it does not answer and "brokerdError" saying why.
            """)
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    struct Versions: Encodable {
        struct Own: Encodable {
            var version: String
            var protocolVersion: String
        }

        var brokerctl = Own(version: brokerVersion, protocolVersion: brokerProtocolVersion)
        var brokerd: BrokerVersionResult?
        var brokerdError: String?
    }

    func run() async throws {
        var versions = Versions()
        do {
            versions.brokerd = try await connection.control().version()
        } catch .brokerNotRunning(let socket, _) {
            versions.brokerdError = "not running at \(socket)"
        } catch {
            versions.brokerdError = "\(error)"
        }
        if output.json { return try printJSON(versions) }
        print("brokerctl \(brokerVersion) (protocol \(brokerProtocolVersion))")
        if let daemon = versions.brokerd {
            print("brokerd \(daemon.version) (protocol \(daemon.protocolVersion))")
        } else {
            print("brokerd: \(versions.brokerdError ?? "unknown")")
        }
    }
}
