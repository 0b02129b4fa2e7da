import ArgumentParser
import BrokerClient
import BrokerJSON
import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Every command names itself (`commandName`). Left out, swift-argument-parser derives each name from the type
/// with `String(describing:)` on every run, and those runtime type lookups took about 1 ms of each brokerctl process.
@main
struct Brokerctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "brokerctl",
        abstract: "Control brokerd, the identity broker: accounts, removal, sign-out, cache import and export, diagnosis.",
        discussion: """
            Exit status: 0 success, 1 the broker refused or failed the request, 3 brokerd is not running, \
            4 the account must sign in again (interaction required), 64 usage error. 'brokerctl doctor' exits 1 when \
            it finds an error; 'brokerctl version' exits 0 without brokerd too. \
            When something does not work, run 'brokerctl doctor': it checks brokerd, its socket, systemd units, \
            session bus, key store, network and clock, and says how to fix what it finds.
            """,
        version: brokerVersion,
        subcommands: [Status.self, Accounts.self, Login.self, Token.self, Remove.self, SignOut.self, Import.self, Export.self,
                      Watch.self, Apps.self, Log.self, Doctor.self, Recover.self, Reset.self, Backup.self, Restore.self, Version.self])

    /// `--socket PATH` is accepted before the subcommand too (`brokerctl --socket S status`), as in ssh-add -s style tools.
    static func main() async {
        await main(movingGlobalOptions(Array(CommandLine.arguments.dropFirst())))
    }

    static func movingGlobalOptions(_ arguments: [String]) -> [String] {
        var rest = arguments, moved: [String] = []
        while let first = rest.first, first.hasPrefix("--socket") {
            moved.append(rest.removeFirst())
            if first == "--socket", !rest.isEmpty { moved.append(rest.removeFirst()) }
        }
        guard !moved.isEmpty, !rest.isEmpty else { return arguments }
        // After the subcommands and their arguments (`apps allow APP`), before a `--` that ends the options.
        let end = rest.firstIndex(of: "--") ?? rest.endIndex
        return Array(rest[..<end]) + moved + rest[end...]
    }
}

/// Options every subcommand takes.
struct ConnectionOptions: ParsableArguments {
    @Option(help: ArgumentHelp("brokerd's socket (default: $BROKERD_SOCKET, else $XDG_RUNTIME_DIR/brokerd/brokerd.sock).",
                               valueName: "path"))
    var socket: String?

    func control() -> BrokerControl { BrokerControl(socketPath: socket) }

    /// `oneShot`: the command makes its calls and exits, so they go without SwiftNIO's threads (`blockingCalls`).
    func application(clientId: String, authority: String?, oneShot: Bool = false) -> PublicClientApplication {
        PublicClientApplication(clientId: clientId, authority: authority, socketPath: socket, blockingCalls: oneShot)
    }
}

struct OutputOptions: ParsableArguments {
    @Flag(help: "Print the broker's answer as JSON.")
    var json = false
}

/// Exit codes documented in --help.
enum ExitStatus {
    static let failed: Int32 = 1
    static let notRunning: Int32 = 3
    static let interactionRequired: Int32 = 4
}

/// Runs a broker call and turns failures into a one-line message and the documented exit code.
func withBroker<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as BrokerError {
        switch error {
        case .brokerNotRunning(let socket, let reason):
            printError("brokerctl: brokerd is not running at \(socket) (\(reason)).")
            printError("hint: start it with 'systemctl --user start brokerd.socket' or run 'brokerd' in a terminal; "
                       + "'brokerctl doctor' says what else is wrong.")
            throw ExitCode(ExitStatus.notRunning)
        case .interactionRequired(let detail):
            printError("brokerctl: \(detail.message)")
            printError("hint: sign in again with 'brokerctl login' (same profile or --client-id).")
            throw ExitCode(ExitStatus.interactionRequired)
        case .appNotAllowed(let detail):
            printError("brokerctl: \(detail.message)")
            if let app = detail.data?.objectValue?["app"]?.stringValue, let client = detail.data?.objectValue?["clientId"]?.stringValue,
               detail.reason != "hostOnlyMethod" {
                printError("hint: 'brokerctl apps allow \(app) --client-id \(client)' lets it; see 'brokerctl apps'.")
            }
            throw ExitCode(ExitStatus.failed)
        default:
            printError("brokerctl: \(error)")
            throw ExitCode(ExitStatus.failed)
        }
    }
}

func printError(_ text: String) {
    var bytes = Array((text + "\n").utf8)
    bytes.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
}

func printJSON<T: Encodable>(_ value: T) throws {
    print(String(decoding: try ProtocolCoding.encode(value), as: UTF8.self))
}
