// swift-tools-version: 6.1
//
// Salvo's benchmark suites (ordo-one/benchmark). A separate package so that building Salvo
// never builds the benchmark framework. Run from this directory:
//
//     swift package --allow-writing-to-package-directory benchmark --target Wire
//
// Suites live in Benchmarks/<Suite>/<Suite>.swift, the layout the benchmark plugin expects.

import PackageDescription

let package = Package(
    name: "SalvoBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Salvo", path: ".."),
        // Only the malloc interposer trait: the runtime (ARC) interposer's package is not
        // needed for the metrics these suites record.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "Wire",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "SalvoWire", package: "Salvo"),
            ],
            path: "Benchmarks/Wire",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        )
    ]
)
