import ArgumentParser
import BrokerClient
import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `brokerctl recover` and `brokerctl reset`: the cache databases brokerd keeps when the key store no longer holds
/// their key (docs/security.md, "When the key is gone").
struct Recover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover",
        abstract: "Merge back the caches waiting for their keys, now that the key store may hold them again.",
        discussion: """
            When the key store loses the cache's key (an emptied keyring, another Secret Service provider, a deleted \
            key file), brokerd keeps the old database untouched and serves a new one; `brokerctl status` shows it \
            as "cache waiting". Bring the key store back (or not), then run this: each waiting database that the store's \
            key or --key-file opens is merged into the cache in use (newer entries win) and then removed. brokerd \
            also tries at start and on SIGHUP.
            """)
    @Option(help: ArgumentHelp("A file holding a 32-byte cache key (a saved cache.key) to try as well.", valueName: "path"))
    var keyFile: String?
    @Option(help: ArgumentHelp("A database to wait for first: one `reset` gave up (cache-….db.given-up-…), or a copy.",
                               valueName: "path"))
    var database: String?
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        var key: [UInt8]?
        if let keyFile {
            do { key = try LocalFile.read(keyFile) } catch {
                printError("brokerctl: \(error)")
                throw ExitCode(ExitStatus.failed)
            }
            guard key?.count == 32 else {
                printError("brokerctl: \(keyFile) holds \(key?.count ?? 0) bytes; a cache key is 32")
                throw ExitCode(ExitStatus.failed)
            }
        }
        let database = self.database.map(LocalFile.absolute)
        let result = try await withBroker { try await connection.control().recoverCaches(key: key, database: database) }
        if output.json { return try printJSON(result) }
        for merged in result.merged {
            print("Merged \(merged.file): \(merged.added) new, \(merged.replaced) replaced, \(merged.keptNewer) kept (newer in use).")
        }
        for problem in result.problems { printError("brokerctl: \(problem)") }
        if result.waiting.isEmpty {
            if result.merged.isEmpty { print("No cache is waiting for its key.") }
        } else {
            print("Still waiting for their keys: \(result.waiting.joined(separator: ", ")).")
            throw ExitCode(ExitStatus.failed)
        }
    }
}

struct Reset: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract: "Give up the caches waiting for their keys (each is kept as a file `recover --database` can still open).")
    @Flag(help: "Do not ask for confirmation.")
    var yes = false
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let control = connection.control()
        let status = try await withBroker { try await control.status() }
        let waiting = status.waitingCaches ?? []
        if waiting.isEmpty {
            if output.json { return try printJSON(ResetWaitingCachesResult(keptAs: [])) }
            return print("No cache is waiting for its key.")
        }
        if !yes {
            guard isatty(0) != 0 else {
                printError("brokerctl: reset gives up \(waiting.count) waiting cache(s); confirm with --yes")
                throw ExitCode(ExitStatus.failed)
            }
            print("These caches wait for their keys; their sign-ins are lost unless the key comes back:")
            for file in waiting { print("  \(file)") }
            print("Give them up? Each is kept as a backup file. Type yes: ", terminator: "")
            fflush(nil)
            guard readLine()?.lowercased() == "yes" else {
                printError("brokerctl: nothing given up")
                throw ExitCode(ExitStatus.failed)
            }
        }
        let kept = try await withBroker { try await control.resetWaitingCaches() }
        if output.json { return try printJSON(ResetWaitingCachesResult(keptAs: kept)) }
        for file in kept { print("Given up; kept as \(file) (`brokerctl recover --database \(file) --key-file KEY` opens it).") }
    }
}

struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write the whole cache to FILE, sealed under a passphrase (scrypt, then AES-256-GCM).",
        discussion: """
            Unlike `export`, the file never holds a secret in the clear; `brokerctl restore FILE` merges it back, on \
            this machine or another. The passphrase is asked for on the terminal (twice), or read from the first \
            line of --passphrase-file.
            """)
    @Argument(help: "The backup file to write (replaced atomically, mode 0600).")
    var file: String
    @OptionGroup var sealing: BackupOptions

    func run() async throws {
        let (path, passphrase, connection, output) = try sealing.prepare(file, confirm: true)
        let result = try await ProgressLine.while("sealing the cache into \(file)") {
            try await withBroker { try await connection.control().backupCache(to: path, passphrase: passphrase) }
        }
        if output.json { return try printJSON(result) }
        print("Backed up \(result.accounts) account(s) to \(file) (\(result.bytes) bytes, sealed under the passphrase).")
    }
}

struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Merge a backup written by `brokerctl backup` into the cache (newer entries win, as an import).")
    @Argument(help: "The backup file.")
    var file: String
    @OptionGroup var sealing: BackupOptions

    func run() async throws {
        let (path, passphrase, connection, output) = try sealing.prepare(file, confirm: false)
        let result = try await ProgressLine.while("opening \(file)") {
            try await withBroker { try await connection.control().restoreCache(from: path, passphrase: passphrase) }
        }
        if output.json { return try printJSON(result) }
        print("Restored \(file): \(result.added) new, \(result.replaced) replaced, \(result.keptNewer) kept (the broker's were newer).")
    }
}

/// What `backup` and `restore` take besides the file.
struct BackupOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Read the passphrase from the first line of this file.", valueName: "path"))
    var passphraseFile: String?
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    /// The file's absolute path and the passphrase (asked twice with `confirm`).
    func prepare(_ file: String, confirm: Bool) throws -> (String, String, ConnectionOptions, OutputOptions) {
        (LocalFile.absolute(file), try Passphrase.read(from: passphraseFile, confirm: confirm), connection, output)
    }
}

/// A backup's passphrase: from a file, or typed on the terminal with echo off.
enum Passphrase {
    static func read(from file: String?, confirm: Bool) throws -> String {
        if let file {
            let bytes: [UInt8]
            do { bytes = try LocalFile.read(file) } catch {
                printError("brokerctl: \(error)")
                throw ExitCode(ExitStatus.failed)
            }
            return String(decoding: bytes.prefix { $0 != 0x0A && $0 != 0x0D }, as: UTF8.self)
        }
        guard isatty(0) != 0 else {
            printError("brokerctl: no terminal to ask for the passphrase on; use --passphrase-file")
            throw ExitCode(ExitStatus.failed)
        }
        let first = typed("Passphrase: ")
        if confirm, typed("Passphrase again: ") != first {
            printError("brokerctl: the passphrases differ")
            throw ExitCode(ExitStatus.failed)
        }
        return first
    }

    private static func typed(_ prompt: String) -> String {
        print(prompt, terminator: "")
        fflush(nil)
        var saved = termios()
        tcgetattr(0, &saved)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(0, TCSAFLUSH, &silent)
        defer {
            tcsetattr(0, TCSAFLUSH, &saved)
            print("")
        }
        return readLine() ?? ""
    }
}
