// swift-tools-version: 6.1
//
// Salvo: a high-throughput sender for the APNs binary provider protocol.
// See README.md for the layout; ../shared/DESIGN.md for the architecture.
// The benchmark suites live in Benchmarks/ (their own package), so that building Salvo
// never builds the benchmark framework.

import PackageDescription

let package = Package(
    name: "Salvo",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SalvoWire", targets: ["SalvoWire"]),
        .library(name: "SalvoIO", targets: ["SalvoIO"]),
        .library(name: "SalvoEngine", targets: ["SalvoEngine"]),
        .library(name: "SalvoMock", targets: ["SalvoMock"]),
        .executable(name: "salvo", targets: ["salvo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.2.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        // `make docs`: the DocC catalogs of SalvoWire and SalvoEngine. A plugin only: nothing links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // SalvoCampaigns: campaigns shared by several workers, and the device registry, in PostgreSQL.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // NIOHTTP1 for `salvo registry serve`'s one endpoint (postgres-nio brings SwiftNIO already).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // C: the Linux system calls Swift's Glibc module does not expose cleanly.
        .target(name: "CLinuxShim"),
        // C: OpenSSL 3 from Debian's libssl-dev, and wrappers for its function-like macros.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(name: "COpenSSLShims", dependencies: ["COpenSSL"]),
        // C: jemalloc, linked by the executables only (the library leaves the allocator to its host).
        .systemLibrary(name: "CJemalloc", providers: [.apt(["libjemalloc-dev"])]),
        // C: libnghttp2 from Debian's libnghttp2-dev, the HTTP/2 machinery of the mock (and the tests' HPACK reference).
        .systemLibrary(
            name: "CNghttp2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),

        // Formats only, no I/O.
        .target(name: "SalvoWire"),
        // Event loops, sockets, TLS.
        .target(
            name: "SalvoIO",
            dependencies: [
                "CLinuxShim", "COpenSSL", "COpenSSLShims",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The sender: shards, connections (binary and HTTP/2), send rings, accounting, campaign sources.
        .target(
            name: "SalvoEngine",
            dependencies: [
                "SalvoWire", "SalvoIO",
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                // ES256 provider tokens for HTTP/2 token authentication.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The mock APNs gateways (binary and HTTP/2) and the feedback service.
        .target(
            name: "SalvoMock",
            dependencies: [
                "SalvoWire", "SalvoIO", "CNghttp2",
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // The benchmark harness behind `salvo bench`: matrix, runs, ceiling, results, plots.
        // No ArgumentParser (the CLI parses the flags) and no jemalloc (the CLI, which links
        // it, passes the allocation counter in).
        .target(
            name: "SalvoBench",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine", "SalvoMock",
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // Campaigns shared by several workers through PostgreSQL (leased chunks, per-chunk
        // outcomes and checkpoints) and the device-token registry. Its own module, so that the
        // engine never depends on a database.
        .target(
            name: "SalvoCampaigns",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The command-line tool, flag parsing only: send, demo, mock, bench, feedback, payload.
        .executableTarget(
            name: "salvo",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine", "SalvoMock", "SalvoBench", "CJemalloc", "SalvoCampaigns",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),

        // What several test targets share: child processes whose pipes are both drained,
        // nghttp2's HPACK inflater as the independent decoder.
        .target(name: "SalvoTestSupport", dependencies: ["SalvoIO", "CNghttp2"], path: "Tests/SalvoTestSupport"),
        // nghttp2's HPACK inflater and deflater check our encoder and decoder.
        .testTarget(name: "SalvoWireTests", dependencies: ["SalvoWire", "SalvoTestSupport", "CNghttp2"]),
        .testTarget(
            name: "SalvoIOTests",
            dependencies: ["SalvoIO", "SalvoWire", .product(name: "SystemPackage", package: "swift-system")]
        ),
        .testTarget(
            name: "SalvoMockTests",
            dependencies: ["SalvoMock", "SalvoIO", "SalvoWire", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // SendCommandTests and MockCommandTests run the built `salvo` executable as a process
        // (`swift build --build-tests` builds it); nothing here imports it.
        .testTarget(
            name: "SalvoEngineTests",
            dependencies: [
                "SalvoEngine", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport", "CNghttp2",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The harness's pure pieces: matrix, statistics, results JSON, table, SVG, README.
        .testTarget(name: "SalvoBenchTests",
                    dependencies: ["SalvoBench", "SalvoEngine", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport"]),
        // A real throwaway PostgreSQL cluster (initdb, pg_ctl) and the real mock gateway.
        .testTarget(
            name: "SalvoCampaignsTests",
            dependencies: [
                "SalvoCampaigns", "SalvoEngine", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
