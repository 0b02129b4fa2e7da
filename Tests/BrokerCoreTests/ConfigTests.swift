import BrokerConfig
import Foundation
import XCTest

final class ConfigTests: XCTestCase {
    private let fullFile = """
    # brokerd configuration
    key_store = "file"
    key_file = '/var/lib/brokerd/cache.key'   # literal string
    allow_root = true
    max_connections = 1_024
    idle_timeout = 600
    shutdown_grace = 0
    write_delay_ms = 50
    log_level = "debug"

    [profile.graph]
    client_id = "00000000-0000-0000-0000-00000000abcd"
    authority = "https://login.microsoftonline.com/organizations"
    scopes = ["https://graph.microsoft.com/User.Read", "https://management.core.windows.net//.default"]

    [profile."azure cli"]
    client_id = "fake-client-id"
    scopes = []
    """

    private func error(_ text: String) -> TOMLError? {
        do {
            _ = try BrokerConfiguration.parse(text)
            return nil
        } catch {
            return error
        }
    }

    func testDefaults() throws {
        let config = try BrokerConfiguration.parse("")
        XCTAssertEqual(config, BrokerConfiguration())
        XCTAssertEqual(config.keyStore, .auto)
        XCTAssertNil(config.keyFile)
        XCTAssertFalse(config.allowRoot)
        XCTAssertEqual(config.maxConnections, 256)
        XCTAssertEqual(config.idleTimeoutSeconds, 300)
        XCTAssertEqual(config.shutdownGraceSeconds, 5)
        XCTAssertEqual(config.writeDelayMilliseconds, 0)
        XCTAssertNil(config.logLevel)
        XCTAssertEqual(config.profiles, [:])
        XCTAssertTrue(config.dbusBroker, "the D-Bus front end is on by default (issue #12)")
    }

    func testAppPolicySettingsAndPins() throws {
        let config = try BrokerConfiguration.parse("""
            sandboxed_apps = "deny"
            unsandboxed_apps = "pinned"
            consent_timeout = 30
            audit_retention_days = 7
            audit_max_rows = 5000

            [[pin]]
            client_id = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
            executables = ["/usr/bin/az"]
            flatpaks = ["org.example.Mail"]

            [[pin]]
            client_id = "other"
            apps = ["snap:firefox", "exe:/opt/tool"]
            snaps = ["thunderbird"]
            """)
        XCTAssertEqual(config.sandboxedApps, "deny")
        XCTAssertEqual(config.unsandboxedApps, "pinned")
        XCTAssertEqual(config.consentTimeoutSeconds, 30)
        XCTAssertEqual(config.auditRetentionDays, 7)
        XCTAssertEqual(config.auditMaxRows, 5000)
        XCTAssertEqual(config.pins, [
            .init(clientId: "04b07795-8ddb-461a-bbee-02f9e1bf7b46", apps: ["exe:/usr/bin/az", "flatpak:org.example.Mail"]),
            .init(clientId: "other", apps: ["snap:firefox", "exe:/opt/tool", "snap:thunderbird"]),
        ])
        for (bad, message) in [
            ("sandboxed_apps = \"allow\"", "'sandboxed_apps' must be"),
            ("unsandboxed_apps = \"deny\"", "'unsandboxed_apps' must be"),
            ("consent_timeout = 600", "'consent_timeout' must be"),
            ("[[pin]]\nexecutables = [\"/usr/bin/az\"]", "[[pin]] needs client_id"),
            ("[[pin]]\nclient_id = \"x\"", "names no app"),
            ("[[pin]]\nclient_id = \"x\"\nexecutables = [\"az\"]", "is not an app"),
            ("[[pin]]\nclient_id = \"x\"\napps = [\"firefox\"]", "is not an app"),
            ("[[pin]]\nclient_id = \"x\"\nusers = [\"a\"]", "unknown setting 'users'"),
        ] {
            let found = error(bad)
            XCTAssertTrue(found?.message.contains(message) == true, "\(bad): \(String(describing: found))")
        }
    }

    func testDBusBroker() throws {
        XCTAssertTrue(try BrokerConfiguration.parse("dbus_broker = true").dbusBroker)
        XCTAssertFalse(try BrokerConfiguration.parse("dbus_broker = false").dbusBroker)
        XCTAssertThrowsError(try BrokerConfiguration.parse("dbus_broker = \"yes\""))
    }

    func testFullValidFile() throws {
        let config = try BrokerConfiguration.parse(fullFile)
        XCTAssertEqual(config.keyStore, .file)
        XCTAssertEqual(config.keyFile, "/var/lib/brokerd/cache.key")
        XCTAssertTrue(config.allowRoot)
        XCTAssertEqual(config.maxConnections, 1024)
        XCTAssertEqual(config.idleTimeoutSeconds, 600)
        XCTAssertEqual(config.shutdownGraceSeconds, 0)
        XCTAssertEqual(config.writeDelayMilliseconds, 50)
        XCTAssertEqual(config.logLevel, "debug")
        XCTAssertEqual(config.profiles.keys.sorted(), ["azure cli", "graph"])
        let graph = try XCTUnwrap(config.profiles["graph"])
        XCTAssertEqual(graph.clientId, "00000000-0000-0000-0000-00000000abcd")
        XCTAssertEqual(graph.authority, "https://login.microsoftonline.com/organizations")
        XCTAssertEqual(graph.scopes, ["https://graph.microsoft.com/User.Read",
                                      "https://management.core.windows.net//.default"])
        let cli = try XCTUnwrap(config.profiles["azure cli"])
        XCTAssertEqual(cli.clientId, "fake-client-id")
        XCTAssertNil(cli.authority)
        XCTAssertEqual(cli.scopes, [])
    }

    func testEveryKeyStoreSetting() throws {
        for setting in BrokerConfiguration.KeyStoreSetting.allCases {
            XCTAssertEqual(try BrokerConfiguration.parse("key_store = \"\(setting.rawValue)\"\n").keyStore, setting)
        }
        XCTAssertEqual(try BrokerConfiguration.parse("key_store = \"secret-service\"").keyStore, .secretService)
        XCTAssertEqual(error("key_store = \"secret_service\"")?.message,
                       "'key_store' must be \"auto\", \"secret-service\", \"file\" or \"memory\"")
    }

    func testMemoryKeyStoreCRLFAndEscapes() throws {
        let text = "key_store = \"memory\"\r\nkey_file = \"/tmp/a \\\"b\\\"\\\\c\"\r\n\r\n  # indented comment\r\n"
        let config = try BrokerConfiguration.parse(text)
        XCTAssertEqual(config.keyStore, .memory)
        XCTAssertEqual(config.keyFile, #"/tmp/a "b"\c"#)
    }

    func testUnknownKey() {
        let error = self.error("key_store = \"file\"\n\nmax_conections = 10\n")
        XCTAssertEqual(error, TOMLError(line: 3, message: "unknown setting 'max_conections'"))
        XCTAssertEqual(error?.description, "line 3: unknown setting 'max_conections'")
        XCTAssertEqual(self.error("[profile.x]\nclient_id = \"c\"\nscope = [\"a\"]\n")?.line, 3)
    }

    func testWrongType() {
        XCTAssertEqual(error("# c\nmax_connections = \"10\""),
                       TOMLError(line: 2, message: "'max_connections' must be an integer in 1...100000"))
        XCTAssertEqual(error("allow_root = \"yes\"")?.line, 1)
        XCTAssertEqual(error("allow_root = \"yes\"")?.message, "'allow_root' must be true or false")
        XCTAssertEqual(error("\n\n\nkey_file = 5"), TOMLError(line: 4, message: "'key_file' must be a string"))
        XCTAssertEqual(error("idle_timeout = 0")?.message, "'idle_timeout' must be an integer in 1...86400")
        XCTAssertEqual(error("key_store = \"keyring\"")?.message, "'key_store' must be \"auto\", \"secret-service\", \"file\" or \"memory\"")
        XCTAssertEqual(error("log_level = \"loud\"")?.line, 1)
        XCTAssertEqual(error("[profile.g]\nclient_id = 5\n")?.line, 2)
        XCTAssertEqual(error("[profile.g]\nclient_id = \"c\"\nscopes = [\"a\", 1]\n"),
                       TOMLError(line: 3, message: "'scopes' must be strings"))
    }

    func testUnquotedString() {
        XCTAssertEqual(error("key_store = \"file\"\nlog_level = info\n"),
                       TOMLError(line: 2, message: "'info' is not a value (strings need quotes)"))
        XCTAssertEqual(error("[profile.g]\nclient_id = abc-123\n")?.line, 2)
        XCTAssertEqual(error("key_file = \"unterminated\n")?.message, "unterminated string")
        XCTAssertEqual(error("log_level = \"info\" trailing\n"),
                       TOMLError(line: 1, message: "unexpected text after the value"))
    }

    func testDuplicateKey() {
        XCTAssertEqual(error("max_connections = 1\nidle_timeout = 2\nmax_connections = 3\n"),
                       TOMLError(line: 3, message: "'max_connections' is set twice"))
        XCTAssertEqual(error("[profile.a]\nclient_id = \"x\"\n\n[profile.a]\nclient_id = \"y\"\n"),
                       TOMLError(line: 4, message: "table [profile.a] appears twice"))
        // The same key in different tables is fine.
        XCTAssertNoThrow(try BrokerConfiguration.parse("[profile.a]\nclient_id = \"x\"\n[profile.b]\nclient_id = \"y\"\n"))
    }

    func testUnknownTable() {
        let text = "max_connections = 8\n\n[server]\nport = 8080\n"
        XCTAssertEqual(error(text)?.message, "unknown table [server]")
        // [profile] itself is known now (it can hold `NAME = { … }`), but settings directly in it are not profiles.
        XCTAssertEqual(error("[profile]\nclient_id = \"c\"\n"),
                       TOMLError(line: 2, message: "'client_id' in [profile] is not a profile: a profile's settings go in [profile.NAME]"))
        XCTAssertEqual(error("max_connections = 8\n[server.tls]\n"), TOMLError(line: 2, message: "unknown table [server.tls]"))
        XCTAssertEqual(error("server.port = 1\n"), TOMLError(line: 1, message: "unknown setting 'server.port'"))
        XCTAssertEqual(error("\n[[server]]\n"), TOMLError(line: 2, message: "unknown table [[server]]"))
        XCTAssertEqual(error("profile = 1\n")?.message, "'profile' must be a table of profiles ([profile.NAME])")
    }

    /// The error names the line of the table header — also when the table is empty (there is no entry line
    /// to fall back on).
    func testUnknownTableLineIsTheHeaderLine() {
        XCTAssertEqual(error("max_connections = 8\n\n[server]\nport = 8080\n"),
                       TOMLError(line: 3, message: "unknown table [server]"))
        XCTAssertEqual(error("max_connections = 8\n\n[server]\n"),
                       TOMLError(line: 3, message: "unknown table [server]"))
    }

    /// Any TOML way of writing a profile configures the same profile.
    func testProfilesFromDottedKeysAndInlineTables() throws {
        let headers = try BrokerConfiguration.parse("[profile.graph]\nclient_id = \"c\"\nscopes = [\"a\"]\n")
        let dotted = try BrokerConfiguration.parse("profile.graph.client_id = \"c\"\nprofile.graph.scopes = [\"a\"]\n")
        let inline = try BrokerConfiguration.parse("[profile]\ngraph = { client_id = \"c\", scopes = [\"a\"] }\n")
        let mixed = try BrokerConfiguration.parse("[profile]\ngraph.client_id = \"c\"\ngraph.scopes = [\n  \"a\", # why\n]\n")
        XCTAssertEqual(headers.profiles["graph"]?.clientId, "c")
        XCTAssertEqual(headers.profiles["graph"]?.scopes, ["a"])
        XCTAssertEqual(dotted, headers)
        XCTAssertEqual(inline, headers)
        XCTAssertEqual(mixed, headers)
        XCTAssertEqual(error("[profile]\ng = { authority = \"x\" }\n"), TOMLError(line: 2, message: "profile 'g' needs client_id"))
        XCTAssertEqual(error("[profile]\ng = { client_id = 5 }\n")?.message, "profile 'g': unknown or mistyped setting 'client_id'")
    }

    /// The rest of TOML 1.0.0 is accepted where the subset reader refused it.
    func testWholeTOMLSyntax() throws {
        let config = try BrokerConfiguration.parse("""
            max_connections = 0x400
            key_file = \"\"\"
            /var/lib/brokerd/\\
            cache.key\"\"\"
            "log_level" = 'info'
            trusted_authority_hosts = [
              "login.example.com",  # ours
              \"\"\"b.example.com\"\"\",
            ]
            """)
        XCTAssertEqual(config.maxConnections, 1024)
        XCTAssertEqual(config.keyFile, "/var/lib/brokerd/cache.key")
        XCTAssertEqual(config.logLevel, "info")
        XCTAssertEqual(config.trustedAuthorityHosts, ["login.example.com", "b.example.com"])
        XCTAssertEqual(error("max_connections = 10.0"), TOMLError(line: 1, message: "'max_connections' must be an integer in 1...100000"))
        XCTAssertEqual(error("idle_timeout = 99999999999999999999")?.message, "'99999999999999999999' does not fit in a 64-bit integer")
        XCTAssertEqual(error("a = 1\nkey_store = \"memory\"\nkey_store = \"file\"\n"),
                       TOMLError(line: 3, message: "'key_store' is set twice"))
    }

    func testProfileWithoutClientId() {
        XCTAssertEqual(error("[profile.g]\nauthority = \"https://login.microsoftonline.com/common\"\n")?.message,
                       "profile 'g' needs client_id")
    }

    func testLoadFromFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("brokercore-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("config.toml").path

        XCTAssertEqual(try BrokerConfiguration.load(path: path), BrokerConfiguration(), "missing file: defaults")
        XCTAssertThrowsError(try BrokerConfiguration.load(path: path, required: true))

        try Data(fullFile.utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(try BrokerConfiguration.load(path: path).profiles["graph"]?.clientId,
                       "00000000-0000-0000-0000-00000000abcd")

        try Data("\n\nbogus = 1\n".utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try BrokerConfiguration.load(path: path)) { error in
            XCTAssertEqual((error as? BrokerConfiguration.Failure)?.description, "\(path): line 3: unknown setting 'bogus'")
        }
        try Data([0x6B, 0x3D, 0xFF]).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try BrokerConfiguration.load(path: path)) { error in
            XCTAssertEqual((error as? BrokerConfiguration.Failure)?.message, "not valid UTF-8")
        }
    }

    func testRequestTimeout() throws {
        XCTAssertEqual(try BrokerConfiguration.parse("").requestTimeoutSeconds, 30)
        XCTAssertEqual(try BrokerConfiguration.parse("request_timeout = 2").requestTimeoutSeconds, 2)
        for refused in ["0", "301", "-1", "9223372036854775807", "2.5", "\"30\""] {
            XCTAssertEqual(error("request_timeout = \(refused)")?.message, "'request_timeout' must be an integer in 1...300", refused)
        }
    }

    func testInteractiveTimeout() throws {
        XCTAssertEqual(try BrokerConfiguration.parse("").interactiveTimeoutSeconds, 600)
        XCTAssertEqual(try BrokerConfiguration.parse("interactive_timeout = 3").interactiveTimeoutSeconds, 3)
        for refused in ["2", "3601", "3.5"] {
            XCTAssertEqual(error("interactive_timeout = \(refused)")?.message, "'interactive_timeout' must be an integer in 3...3600", refused)
        }
    }

    func testBackgroundRefreshSettings() throws {
        let config = try BrokerConfiguration.parse("refresh_check_interval = 5\nrenew_ahead = 0\nrefresh_backoff = 2\n")
        XCTAssertEqual(config.refreshCheckIntervalMilliseconds, 5000)
        XCTAssertEqual(config.renewAheadSeconds, 0)
        XCTAssertEqual(config.refreshBackoffSeconds, 2)
        XCTAssertEqual(BrokerConfiguration().refreshBackoffSeconds, 60)
        XCTAssertEqual(error("refresh_backoff = 0")?.message, "'refresh_backoff' must be an integer in 1...3600")
        XCTAssertEqual(BrokerConfiguration().refreshCheckIntervalMilliseconds, 60_000)
        XCTAssertEqual(try BrokerConfiguration.parse("refresh_check_interval = 0.25").refreshCheckIntervalMilliseconds, 250)
        XCTAssertEqual(try BrokerConfiguration.parse("refresh_check_interval = 3600").refreshCheckIntervalMilliseconds, 3_600_000)
        for refused in ["0.05", "0", "-1", "3600.5", "inf", "nan", "\"60\"", "true"] {
            XCTAssertEqual(error("refresh_check_interval = \(refused)")?.message,
                           "'refresh_check_interval' must be a number of seconds in 0.1...3600", refused)
        }
    }

    func testHooksTable() throws {
        XCTAssertEqual(BrokerConfiguration().hooks, BrokerConfiguration.Hooks(commands: [:], timeoutSeconds: 10))
        let config = try BrokerConfiguration.parse("""
            [hooks]
            sign_in_required = 'notify-send "Sign in again: $BROKERD_USERNAME"'
            sign_in_pending = "echo $BROKERD_USER_CODE"
            token_refreshed = "logger refreshed"
            refresh_failed = "logger failed"
            timeout = 300
            """)
        XCTAssertEqual(config.hooks.commands, [
            .signInRequired: #"notify-send "Sign in again: $BROKERD_USERNAME""#, .signInPending: "echo $BROKERD_USER_CODE",
            .tokenRefreshed: "logger refreshed", .refreshFailed: "logger failed",
        ])
        XCTAssertEqual(config.hooks.timeoutSeconds, 300)
        XCTAssertEqual(try BrokerConfiguration.parse("hooks.refresh_failed = \"x\"").hooks.commands, [.refreshFailed: "x"])
        XCTAssertEqual(try BrokerConfiguration.parse("[hooks]\ntimeout = 1").hooks, .init(commands: [:], timeoutSeconds: 1))
    }

    func testHooksMistakesAreRefused() {
        for timeout in ["0", "301", "\"10\"", "1.5"] {
            XCTAssertEqual(error("[hooks]\ntimeout = \(timeout)"), TOMLError(line: 2, message: "'timeout' must be an integer in 1...300"), timeout)
        }
        XCTAssertEqual(error("[hooks]\non_refresh = \"x\""), TOMLError(line: 2, message:
            "[hooks]: unknown setting 'on_refresh' (sign_in_required, sign_in_pending, token_refreshed, refresh_failed, timeout)"))
        for command in ["\"\"", "\"  \"", "true", "[\"echo\"]"] {
            XCTAssertEqual(error("[hooks]\ntoken_refreshed = \(command)"),
                           TOMLError(line: 2, message: "[hooks] token_refreshed must be a non-empty shell command (a string)"), command)
        }
        XCTAssertEqual(error("hooks = \"echo\"")?.message, "'hooks' must be a table ([hooks])")
    }
}
