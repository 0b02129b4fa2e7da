// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "brokerd-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The parent package (brokerd); its library product BrokerBenchmarkSupport exposes the internal targets.
        .package(name: "brokerd", path: ".."),
    ],
    targets: [
        .executableTarget(
            name: "BrokerBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "BrokerBenchmarkSupport", package: "brokerd"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/BrokerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
