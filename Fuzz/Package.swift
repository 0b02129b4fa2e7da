// swift-tools-version:6.0
// libFuzzer targets for brokerd's parsers of outside input. Built only by scripts/fuzz.sh, with
// `--sanitize=fuzzer --sanitize=address`, into `.build-fuzz`: a package of its own so that the sanitizers never touch
// the NIO / AsyncHTTPClient tree, and the main package's `swift build` never sees executables without a `main`.
// The parser modules are the main package's own sources (symbolic links under Modules/), compiled here as they are.
import PackageDescription

/// Each target defines `LLVMFuzzerTestOneInput`; libFuzzer supplies `main`.
let fuzzEntry: [SwiftSetting] = [.unsafeFlags(["-parse-as-library"])]

let targets: [(name: String, dependencies: [Target.Dependency])] = [
    ("fuzz-json-reader", ["BrokerJSON"]),
    ("fuzz-rpc-line", ["BrokerJSON", "BrokerProtocol", "BrokerWire"]),
    ("fuzz-cache-document", ["BrokerJSON", "BrokerCache"]),
    ("fuzz-oauth-responses", ["BrokerJSON", "OAuthParsing"]),
    ("fuzz-id-token", ["BrokerJSON", "OAuthParsing"]),
    ("fuzz-config", ["BrokerConfig"]),
    // Sources/BrokerDBus/Broker1Requests.swift is linked into the target itself (its types are internal).
    ("fuzz-dbus-request", ["BrokerJSON"]),
    // Sources/BrokerCore/Apps/CallerIdentity.swift and FlatpakInfo.swift: what a caller's process shows (pure Swift).
    ("fuzz-app-identity", ["AppIdentityParsing"]),
]

let package = Package(
    name: "brokerd-fuzz",
    targets: [
        .target(name: "BrokerJSON", path: "Modules/BrokerJSON"),
        .target(name: "BrokerProtocol", dependencies: ["BrokerJSON"], path: "Modules/BrokerProtocol"),
        .target(name: "BrokerWire", dependencies: ["BrokerJSON", "BrokerProtocol"], path: "Modules/BrokerWire"),
        .target(name: "BrokerCache", dependencies: ["BrokerJSON"], path: "Modules/BrokerCache"),
        .target(name: "BrokerConfig", path: "Modules/BrokerConfig"),
        // The pure parsers of Sources/OAuth (token, device-code, discovery and error responses, id_token,
        // client_info): the files that need no HTTP client.
        .target(name: "OAuthParsing", dependencies: ["BrokerJSON", "BrokerPlatform"], path: "Modules/OAuthParsing"),
        // BrokerPlatform's lock only (Sources/BrokerPlatform/Locked.swift), which HostBackoff.swift takes.
        .target(name: "BrokerPlatform", path: "Modules/BrokerPlatformLock"),
        // The rules that make a caller's identity from what its process shows (BrokerCore/Apps, the pure files).
        .target(name: "AppIdentityParsing", path: "Modules/AppIdentityParsing"),
    ] + targets.map {
        .executableTarget(name: $0.name, dependencies: $0.dependencies, path: "Targets/\($0.name)", swiftSettings: fuzzEntry)
    }
)
