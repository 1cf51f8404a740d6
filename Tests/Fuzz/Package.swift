// swift-tools-version: 6.1
//
// Coverage-guided fuzz targets for Salvo's parsers, one libFuzzer executable each.
// A package of its own, so that `swift build` of Salvo never builds them: they only link
// with `-sanitize=fuzzer` (libFuzzer supplies `main`). Build and run them with `make fuzz`
// (see Tests/Fuzz/fuzz.sh); the README's testing section says how.

import PackageDescription

let fuzzers = [
    "FrameDecoderFuzzer", "GatewayReplyFuzzer", "JSONScannerFuzzer", "CampaignLineFuzzer",
    "CheckpointFuzzer", "PayloadBuilderFuzzer", "ClientSessionFuzzer", "HPACKDecoderFuzzer", "HTTP1RequestFuzzer",
    "JSONBatchFuzzer",
]

let package = Package(
    name: "SalvoFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Salvo", path: "../..")],
    targets: [
        // Feeding in splits, properties that stop the fuzzer, scratch files.
        .target(name: "FuzzSupport", dependencies: [.product(name: "SalvoIO", package: "Salvo")]),
        // nghttp2, which HPACKDecoderFuzzer checks our HPACK decoder against.
        .systemLibrary(name: "CNghttp2Fuzz", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
    ] + fuzzers.map { name in
        .executableTarget(
            name: name,
            dependencies: [
                "FuzzSupport",
                .product(name: "SalvoWire", package: "Salvo"),
                .product(name: "SalvoEngine", package: "Salvo"),
                .product(name: "SalvoCampaignFiles", package: "Salvo"),
            ] + (name == "HPACKDecoderFuzzer" ? ["CNghttp2Fuzz"] : [])
        )
    },
    swiftLanguageModes: [.v6]
)
