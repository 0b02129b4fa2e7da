// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "brokerd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "brokerd", targets: ["brokerd"]),
        .executable(name: "brokerctl", targets: ["brokerctl"]),
        .library(name: "BrokerClient", targets: ["BrokerClient"]),
        .library(name: "BrokerBenchmarkSupport", targets: ["BrokerCache", "BrokerCore", "BrokerProtocol", "BrokerWire", "BrokerServer", "BrokerJSON", "BrokerStore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // libsystemd (sd_notify, sd_listen_fds, sd_journal_sendv) plus two tiny Linux shims.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"]), .yum(["systemd-devel"])]
        ),
        .target(name: "Systemd", dependencies: [
            "CSystemd",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The system calls of process identity that Swift cannot call (syscall is variadic): pidfd_open,
        // pidfd_send_signal, SO_PEERPIDFD.
        .target(name: "CBrokerPlatform"),
        // The operating system, Linux side, in one place (as NIOPosix is for SwiftNIO): threads, the one lock type,
        // crash-safe files, process memory and hardening, who a process is (a pinned /proc directory), child
        // commands, network changes.
        .target(name: "BrokerPlatform", dependencies: ["CBrokerPlatform"]),
        // A small JSON reader/writer that keeps unknown values byte-for-byte (the cache needs that).
        .target(name: "BrokerJSON"),
        // Wire contract: JSON-RPC envelope, method names, params/results, error codes, socket location.
        .target(name: "BrokerProtocol", dependencies: ["BrokerJSON"]),
        // The server side's wire speed-ups, kept out of the contract every client links: a request line's shape
        // scanned once, a repeated request recognised around its id, the usual silent params read without the
        // decoder, and a token result written directly.
        .target(name: "BrokerWire", dependencies: ["BrokerJSON", "BrokerProtocol"]),
        // OAuth 2.0 / OIDC on the wire: discovery, token endpoint, PKCE, loopback redirect, device code,
        // id_token and client_info decoding. Knows nothing about the cache.
        .target(name: "OAuth", dependencies: [
            "BrokerJSON", "BrokerPlatform",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The cache model: entries, indexes, accounts, per-app removal, merge, scopes. Pure values: no I/O, no
        // OAuth, no clock of its own (callers pass `now`).
        .target(name: "BrokerCache", dependencies: ["BrokerJSON"]),
        // The broker: persistence, token acquisition on top of the cache model. Knows nothing about sockets or JSON-RPC.
        .target(name: "BrokerCore", dependencies: [
            "BrokerJSON", "BrokerCache", "BrokerPlatform", "BrokerStore", "OAuth",
            .product(name: "Crypto", package: "swift-crypto"),
            // scrypt for the passphrase of a backup (CacheBackup.swift).
            .product(name: "CryptoExtras", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
            // The browser of an interactive sign-in is started with swift-subprocess (FilePath is swift-system's).
            .product(name: "Subprocess", package: "swift-subprocess"),
            .product(name: "SystemPackage", package: "swift-system"),
        ]),
        // The daemon's configuration file (shared by brokerd and brokerctl).
        .target(name: "BrokerConfig"),
        // The system SQLite 3 library (C API only; no Foundation-based wrapper).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .yum(["sqlite-devel"])]
        ),
        // The token cache in SQLite: one row per entry, secrets sealed with AES-256-GCM, transactional updates.
        .target(name: "BrokerStore", dependencies: [
            "CSQLite", "BrokerPlatform",
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        // A client of the freedesktop Secret Service (org.freedesktop.secrets) over sd-bus, on a connection of its own:
        // where the key_store = "secret-service" store keeps the cache key.
        .target(name: "SecretService", dependencies: ["CSystemd"]),
        // The com.microsoft.identity.broker1 D-Bus front end (sd-bus): translates onto BrokerCore, like BrokerServer.
        .target(name: "BrokerDBus", dependencies: [
            "BrokerJSON", "BrokerCache", "BrokerCore", "BrokerPlatform", "BrokerStore", "CSystemd",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Unix socket server: framing, peer credentials, dispatch to BrokerCore (no NIO: a thread per connection).
        .target(name: "BrokerServer", dependencies: [
            "BrokerJSON", "BrokerProtocol", "BrokerWire", "BrokerCache", "BrokerCore", "BrokerPlatform", "BrokerStore", "CBrokerPlatform",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The client library apps link (MSAL-shaped PublicClientApplication) and brokerctl's only way to the daemon.
        .target(name: "BrokerClient", dependencies: [
            "BrokerJSON", "BrokerProtocol",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .executableTarget(name: "brokerd", dependencies: [
            "BrokerServer", "BrokerDBus", "BrokerCore", "BrokerPlatform", "BrokerStore", "BrokerConfig", "BrokerProtocol", "Systemd",
            "SecretService",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ]),
        // libqrencode: brokerctl shows a device-code sign-in's address as a QR code (TerminalQR.swift).
        .systemLibrary(
            name: "CQRencode",
            pkgConfig: "libqrencode",
            providers: [.apt(["libqrencode-dev"]), .yum(["qrencode-devel"])]
        ),
        .executableTarget(name: "brokerctl", dependencies: [
            "BrokerClient", "BrokerProtocol", "BrokerJSON", "BrokerConfig", "CQRencode",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // Sample app (Examples/README.md): a profile viewer on BrokerClient; its SSO partner is Examples/python-mail-count.
        .executableTarget(name: "profile-example", dependencies: [
            "BrokerClient",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
        ], path: "Examples/swift-profile"),
        .testTarget(name: "BrokerCoreTests", dependencies: ["BrokerCache", "BrokerCore", "BrokerJSON", "BrokerConfig", "BrokerProtocol",
                                                      "BrokerStore", "BrokerPlatform"],
                    resources: [.copy("Fixtures")]),
        // docs/openrpc.json against the Swift protocol types (MethodCatalog): a missing method or field fails.
        .testTarget(name: "ProtocolTests", dependencies: ["BrokerProtocol", "BrokerWire", "BrokerJSON"]),
        .testTarget(name: "OAuthTests", dependencies: ["OAuth", "BrokerCache", "BrokerCore", "BrokerJSON"]),
        // brokerctl's QR renderer (TerminalQR.swift), decoded back with a real decoder (zbarimg).
        .testTarget(name: "BrokerctlTests", dependencies: ["brokerctl"]),
        .testTarget(name: "BrokerIntegrationTests", dependencies: ["BrokerClient", "BrokerProtocol", "BrokerJSON"]),
        // The socket front end's pure translations (failures as JSON-RPC errors) and its request queue.
        .testTarget(name: "BrokerServerTests", dependencies: ["BrokerServer", "BrokerCore", "BrokerCache", "BrokerProtocol", "BrokerJSON"]),
        // broker1's pure translations (the answers it writes), without a bus.
        .testTarget(name: "BrokerDBusTests", dependencies: ["BrokerDBus", "BrokerCore", "BrokerJSON"]),
        // The client library's own logic: brokerd's errors as the cases an app switches on.
        .testTarget(name: "BrokerClientTests", dependencies: ["BrokerClient", "BrokerProtocol", "BrokerJSON"]),
        // BrokerPlatform's lock, threads and file helpers.
        .testTarget(name: "BrokerPlatformTests", dependencies: ["BrokerPlatform"]),
        .testTarget(name: "BrokerStoreTests", dependencies: [
            "BrokerStore",
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
    ]
)
