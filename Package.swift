// swift-tools-version: 6.1
//
// Salvo: a high-throughput sender for Apple's push notification service: the HTTP/2
// provider API, and the legacy binary protocol.
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
        .library(name: "SalvoCampaignFiles", targets: ["SalvoCampaignFiles"]),
        .library(name: "SalvoMock", targets: ["SalvoMock"]),
        .library(name: "SalvoChannels", targets: ["SalvoChannels"]),
        .executable(name: "salvo", targets: ["salvo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        // `make docs`: the DocC catalogs of SalvoWire and SalvoEngine. A plugin only: nothing links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // The BlackBerry Dynamics Push Channel target (SalvoBlackBerry): HTTP/1.1 keep-alive over TLS.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // Logging: the engine and the mocks log connection events, adaptations and give-ups through swift-log.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Metrics: the engine's and the mocks' totals, flushed periodically (never per notification).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // `--metrics-port`: the Prometheus text format behind /metrics (SalvoPrometheus only).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `Sender` and the mocks as `Service`s: graceful shutdown on SIGTERM.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // SalvoPostgres: campaigns shared by several workers, and the device registry, in PostgreSQL.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // `salvo serve`: the engine behind an HTTP API (HTTP/1.1, and HTTP/2 over TLS).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
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
        // swift-log and swift-metrics pieces the engine, the mocks and the CLI share: totals fed to
        // swift-metrics a flush at a time, the CLI's stderr log handler (text or JSON).
        .target(
            name: "SalvoTelemetry",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // `--metrics-port`: GET /metrics in the Prometheus text format, on a SalvoIO loop thread.
        .target(
            name: "SalvoPrometheus",
            dependencies: [
                "SalvoIO",
                "SalvoTelemetry",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
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
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                // ES256 provider tokens for HTTP/2 token authentication.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SystemPackage", package: "swift-system"),
                // Logs, metrics (flushed from the totals it keeps anyway) and `Service`.
                "SalvoTelemetry",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The mock APNs gateways (binary and HTTP/2) and the feedback service.
        // Campaign files (one notification per line) and their checkpoints: what a run
        // reads and how it resumes, shared by the CLI, PostgreSQL campaigns and BlackBerry.
        .target(
            name: "SalvoCampaignFiles",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "SalvoMock",
            dependencies: [
                "SalvoWire", "SalvoIO", "CNghttp2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
                "SalvoTelemetry",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The benchmark harness behind `salvo bench`: matrix, runs, ceiling, results, plots.
        // No ArgumentParser (the CLI parses the flags) and no jemalloc (the CLI, which links
        // it, passes the allocation counter in).
        .target(
            name: "SalvoBench",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine", "SalvoMock", "SalvoBlackBerry",
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // The BlackBerry Dynamics Push Channel sender: campaigns of Push Channel tokens sent to
        // the NOC's notify service on AsyncHTTPClient. NIO stays in this module (the GNP
        // format is in SalvoWire, the mock NOC in SalvoMock).
        .target(
            name: "SalvoBlackBerry",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine", "SalvoCampaignFiles", "SalvoHTTPClientProxy",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // Broadcast channel management (iOS 18 Live Activities) on APNs's own management host, on
        // AsyncHTTPClient over HTTP/2: a few requests, not a hot path, so NIO stays out of the
        // engine; provider tokens are the engine's (one per team, shared through its stores).
        // Our proxy configuration in AsyncHTTPClient's terms, for the two clients built on it.
        .target(
            name: "SalvoHTTPClientProxy",
            dependencies: ["SalvoIO", .product(name: "AsyncHTTPClient", package: "async-http-client")]
        ),
        .target(
            name: "SalvoChannels",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine", "SalvoHTTPClientProxy",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // Campaigns shared by several workers through PostgreSQL (leased chunks, per-chunk
        // outcomes and checkpoints) and the device-token registry. Its own module, so that the
        // engine never depends on a database.
        .target(
            name: "SalvoPostgres",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine", "SalvoCampaignFiles",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // `salvo serve`: notifications taken over HTTP, sent by the engine, their outcomes kept
        // for a while and pushed to a webhook. Hummingbird and NIO stay in this module.
        .target(
            name: "SalvoServe",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine", "SalvoCampaignFiles", "SalvoHTTPClientProxy", "SalvoTelemetry",
                // `--db`: the journal's SQL lives in SalvoPostgres with the other tables (and
                // PostgresNIO behind it); serve decides when to write. Not the reverse: the
                // campaign store needs nothing of HTTP.
                "SalvoPostgres",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The API as an OpenAPI 3.1 document, kept honest by SalvoServeTests' OpenAPITests.
            exclude: ["openapi.yaml"]
        ),
        // The command-line tool, flag parsing only: send, demo, mock, bench, feedback, payload, channel.
        .executableTarget(
            name: "salvo",
            dependencies: [
                "SalvoWire", "SalvoIO", "SalvoEngine", "SalvoCampaignFiles", "SalvoMock", "SalvoBench", "CJemalloc", "SalvoBlackBerry", "SalvoPostgres", "SalvoChannels", "SalvoServe",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
                "SalvoTelemetry", "SalvoPrometheus",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),

        // What several test targets share: loopback rigs (the real mock and a sender
        // configured for it), child processes whose pipes are both drained, bounded waits,
        // nghttp2's HPACK inflater as the independent decoder.
        .target(name: "SalvoTestSupport", dependencies: ["SalvoIO", "SalvoWire", "SalvoEngine", "SalvoMock", "CNghttp2", "CLinuxShim"],
                path: "Tests/SalvoTestSupport"),
        // nghttp2's HPACK inflater and deflater check our encoder and decoder.
        .testTarget(name: "SalvoWireTests", dependencies: ["SalvoWire", "SalvoTestSupport", "CNghttp2"]),
        .testTarget(
            name: "SalvoIOTests",
            dependencies: ["SalvoIO", "SalvoWire", .product(name: "SystemPackage", package: "swift-system")]
        ),
        .testTarget(
            name: "SalvoMockTests",
            dependencies: ["SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "SalvoEngineTests",
            dependencies: [
                "SalvoEngine", "SalvoCampaignFiles", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport", "CNghttp2",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Crypto", package: "swift-crypto"),
                // The observability tests: metrics scraped through SalvoPrometheus, `Service`, logs.
                "SalvoTelemetry", "SalvoPrometheus",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The command line as a user meets it: the built `salvo` executable run as a process
        // (`swift build --build-tests` builds it) against the mock; the README's commands
        // parsed by the command itself.
        .testTarget(
            name: "SalvoCLITests",
            dependencies: [
                "salvo", "SalvoEngine", "SalvoCampaignFiles", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The harness's pure pieces: matrix, statistics, results JSON, table, SVG, README.
        .testTarget(name: "SalvoBenchTests",
                    dependencies: ["SalvoBench", "SalvoEngine", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport"]),
        // The Push Channel sender against the real mock NOC on loopback, and the pure parser.
        .testTarget(name: "SalvoBlackBerryTests",
                    dependencies: ["SalvoBlackBerry", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoEngine", "SalvoCampaignFiles", "SalvoTestSupport"]),
        // Channel requests built and answers judged without a server; the client against the real mock.
        .testTarget(name: "SalvoChannelsTests",
                    dependencies: ["SalvoChannels", "SalvoEngine", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport"]),
        // A real throwaway PostgreSQL cluster (initdb, pg_ctl) and the real mock gateway.
        .testTarget(
            name: "SalvoPostgresTests",
            dependencies: [
                "SalvoPostgres", "SalvoEngine", "SalvoCampaignFiles", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        // `salvo serve` against the real mock: real HTTP clients, a real webhook receiver.
        .testTarget(
            name: "SalvoServeTests",
            dependencies: [
                "SalvoServe", "SalvoEngine", "SalvoCampaignFiles", "SalvoMock", "SalvoIO", "SalvoWire", "SalvoTestSupport",
                // `serve --db` against a real throwaway PostgreSQL cluster; its kill -9 test runs the
                // built `salvo` executable (`swift build --build-tests` builds it).
                "SalvoPostgres",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
