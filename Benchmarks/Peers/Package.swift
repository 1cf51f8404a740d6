// swift-tools-version: 6.1
//
// Peers for scripts/h2-peers.sh: a small APNs-shaped client on AsyncHTTPClient, the HTTP/2
// transport APNSwift uses. A package of its own so that neither Salvo nor the benchmark suites
// (Benchmarks/Package.swift) ever build AsyncHTTPClient. Build from this directory:
//
//     swift build -c release        (its .build/ stays here, ignored by git)

import PackageDescription

let package = Package(
    name: "SalvoPeers",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ],
    targets: [
        .executableTarget(
            name: "ahc-apns",
            dependencies: [.product(name: "AsyncHTTPClient", package: "async-http-client")],
            path: "Sources/ahc-apns"
        )
    ]
)
