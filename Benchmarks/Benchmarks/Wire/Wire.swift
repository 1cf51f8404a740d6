// SalvoWire hot paths: encoding a frame, building a payload, decoding a frame stream.
//
// Run from Benchmarks/:
//     swift package --allow-writing-to-package-directory benchmark --target Wire
// Check the committed thresholds (0 mallocs):
//     swift package benchmark thresholds check --target Wire
//
// Every benchmark does its setup outside the measured closure, so what is measured is the
// steady state a sender or the mock gateway runs in: preallocated memory, no allocation.

import Benchmark
import SalvoWire

/// A typical 112-byte payload: alert with title and body, badge, sound.
let typicalPayload = Array(
    #"{"aps":{"alert":{"title":"Order shipped","body":"Your order #4711 is on its way."},"badge":3,"sound":"default"}}"#
        .utf8)

let token = try! DeviceToken(hex: "7c1d2f3e4a5b6c7d8e9fa0b1c2d3e4f5061728394a5b6c7d8e9f0a1b2c3d4e5f")

/// The decoder is noncopyable; a class lets the benchmark closure keep one across
/// iterations (allocated once, reused, as in the mock gateway).
final class DecoderBox {
    var decoder = FrameDecoder()
}

/// The items a payload builder typically carries.
func typicalBuilder() -> PayloadBuilder {
    var builder = PayloadBuilder()
    builder.alertTitle = "Order shipped"
    builder.alertBody = "Your order #4711 is on its way."
    builder.badge = 3
    builder.sound = .default
    return builder
}

let benchmarks: @Sendable () -> Void = {
    // Zero tolerance on allocations: compared against the static thresholds in
    // Thresholds/Wire.<benchmark>.p90.json (all 0) by `benchmark thresholds check`.
    let noAllocations: [BenchmarkMetric: BenchmarkThresholds] = [
        .mallocCountTotal: .init(absolute: [.p90: 0])
    ]
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        timeUnits: .nanoseconds,
        warmupIterations: 3,
        maxDuration: .seconds(3),
        maxIterations: 1_000,
        thresholds: noAllocations
    )
    // Instructions are counted in separate "…Instructions" runs of the same bodies: the
    // framework's perf-counter bookkeeping allocates 16 blocks per measured iteration
    // (an empty benchmark shows it too), which would hide a real allocation in our code.
    func register(
        _ name: String, scalingFactor: BenchmarkScalingFactor, _ body: @escaping (Benchmark) throws -> Void
    ) {
        Benchmark(name, configuration: .init(scalingFactor: scalingFactor)) { try body($0) }
        Benchmark(
            name + "Instructions",
            configuration: .init(
                metrics: [.instructions], scalingFactor: scalingFactor, maxDuration: .seconds(1),
                maxIterations: 100, thresholds: [:])
        ) { try body($0) }
    }

    // One command-2 frame (all five items, 32-byte token, 112-byte payload) per scaled
    // iteration, written back to back into a 64 KiB ring the way a SendRing would be filled.
    register("EncodeFrame", scalingFactor: .mega) { benchmark in
        let encoder = FrameEncoder(format: .frame)
        let ring = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 64)
        defer { ring.deallocate() }
        var offset = 0
        var identifier: UInt32 = 0
        try typicalPayload.withUnsafeBytes { payload in
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                identifier &+= 1
                let slot = UnsafeMutableRawBufferPointer(rebasing: ring[offset...])
                switch try encoder.encode(
                    token: token, payload: payload, identifier: identifier,
                    expiry: 1_700_000_000, priority: 10, into: slot)
                {
                case .written(let length):
                    offset += length
                case .needsCapacity:
                    offset = 0  // the ring was flushed
                }
            }
            benchmark.stopMeasurement()
        }
        blackHole(ring[offset &- 1 & 0xFFFF])
    }

    // Decode 1000 pre-encoded command-2 frames per iteration; the scaling factor makes the
    // reported throughput frames per second.
    let frameCount = 1_000
    let stream: [UInt8] = {
        let encoder = FrameEncoder(format: .frame)
        var bytes: [UInt8] = []
        for identifier in 0..<UInt32(frameCount) {
            let length = encoder.encodedLength(payloadLength: typicalPayload.count)
            let start = bytes.count
            bytes += repeatElement(0, count: length)
            _ = bytes[start...].withUnsafeMutableBytes { slot in
                typicalPayload.withUnsafeBytes { payload in
                    try! encoder.encode(
                        token: token, payload: payload, identifier: identifier,
                        expiry: 1_700_000_000, priority: 10, into: slot)
                }
            }
        }
        return bytes
    }()
    let box = DecoderBox()
    register("DecodeStream", scalingFactor: .kilo) { benchmark in
        var frames = 0
        var payloadBytes = 0
        stream.withUnsafeBytes { input in
            benchmark.startMeasurement()
            let stop = box.decoder.decode(input) { notification in
                frames &+= 1
                payloadBytes &+= notification.payload.count
                return true
            }
            benchmark.stopMeasurement()
            precondition(stop == nil && frames == frameCount)
        }
        blackHole(payloadBytes)
    }

    // The same stream fed in 16 KiB slices, the largest TLS record SSL_read returns: about
    // one frame in 100 straddles a slice and goes through the carry buffer.
    register("DecodeStream16KSlices", scalingFactor: .kilo) { benchmark in
        var frames = 0
        var payloadBytes = 0
        stream.withUnsafeBytes { input in
            benchmark.startMeasurement()
            var offset = 0
            while offset < input.count {
                let end = Swift.min(offset + 16 * 1024, input.count)
                let stop = box.decoder.decode(UnsafeRawBufferPointer(rebasing: input[offset..<end])) { notification in
                    frames &+= 1
                    payloadBytes &+= notification.payload.count
                    return true
                }
                precondition(stop == nil)
                offset = end
            }
            benchmark.stopMeasurement()
            precondition(frames == frameCount && box.decoder.pendingByteCount == 0)
        }
        blackHole(payloadBytes)
    }

    // Build a typical payload (title, body, badge, sound) into a reusable buffer.
    let payloadBuffer = PayloadBuffer()
    let builder = typicalBuilder()
    // The payload the encode and decode suites use is exactly what this builder produces.
    let built: [UInt8] = try! builder.build()
    precondition(built == typicalPayload, "typical payload drifted: \(String(decoding: built, as: UTF8.self))")
    register("BuildPayload", scalingFactor: .kilo) { benchmark in
        var total = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            total &+= try builder.build(into: payloadBuffer)
        }
        benchmark.stopMeasurement()
        blackHole(total)
    }
}
