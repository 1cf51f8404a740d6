import SalvoIO
import SalvoWire
#if canImport(Glibc)
import Glibc
#endif

/// Measures how fast a `MockGateway` ingests notifications: the gateway runs on one loop
/// thread, and the calling thread writes pre-encoded command-2 frames to it over one TLS
/// connection, in `chunkSize` `SSL_write`s, until `frameCount` frames were accepted.
///
/// The clock runs from the first write to the moment the gateway has published the last
/// frame as accepted, so it covers the sender's encryption, the kernel and the gateway's
/// decryption and decoding. It measures the mock, not a sender: frames are encoded once.
public enum IngestProbe {
    /// One run's outcome.
    public struct Result: Sendable, Hashable, Codable {
        /// Frames written and accepted.
        public var frames: Int
        /// Bytes per frame.
        public var frameLength: Int
        /// Wall time from the first write until all frames were accepted.
        public var seconds: Double
        /// `frames / seconds`.
        public var framesPerSecond: Double { Double(frames) / seconds }
        /// Application bytes per second.
        public var bytesPerSecond: Double { Double(frames * frameLength) / seconds }
        /// CPU time the gateway's loop thread used over `seconds`: near 1 × `seconds`
        /// means the gateway was the bottleneck, well below means it waited for the sender.
        public var gatewayCPUSeconds: Double
        /// CPU time the sending thread used over `seconds`.
        public var senderCPUSeconds: Double
    }

    /// Why a probe did not finish.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs one probe.
    ///
    /// - Parameters:
    ///   - frameCount: how many frames to send.
    ///   - frameLength: the frame size, 61 + payload bytes (all five items), at least 82; default 161.
    ///   - chunkSize: bytes per `SSL_write` (one TLS record at most 16 KiB).
    ///   - server: the gateway's TLS setup; `client` must trust it.
    public static func run(
        frameCount: Int, frameLength: Int = 161, chunkSize: Int = 16384,
        server: TLSConfiguration, client: TLSContext, timeout: Duration = .seconds(120)
    ) throws -> Result {
        precondition(frameCount > 0 && frameLength >= 82 && chunkSize > 0, "frames of at least 82 bytes (a 21-byte JSON payload)")
        let gateway = try MockGateway(.init(tls: server, loops: 1))
        defer { gateway.stop() }
        let stream = try TLSStream.connect(host: "127.0.0.1", port: gateway.port, context: client)
        let gatewayClock = try gateway.core.runtime.loops[0].eventLoop.runAndWait { ThreadClock.current() }
        let senderClock = ThreadClock.current()

        // A whole number of frames and of chunks, so every write is a full chunk.
        let framesInBuffer = chunkSize
        let buffer = encodeFrames(count: framesInBuffer, frameLength: frameLength)
        let total = frameCount * frameLength

        let started = Instant.now()
        let gatewayCPUStart = gatewayClock.seconds
        let senderCPUStart = senderClock.seconds
        let deadline = started + timeout
        try buffer.withUnsafeBytes { bytes in
            var sent = 0
            while sent < total {
                let offset = sent % bytes.count
                let length = min(chunkSize, bytes.count - offset, total - sent)
                try stream.writeAll(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]),
                                    timeout: deadline.since(.now()))
                sent += length
            }
        }
        while gateway.statistics().accepted < frameCount {
            guard Instant.now() < deadline else {
                throw Failure(description: "timed out: \(gateway.statistics().accepted) of \(frameCount) frames accepted")
            }
            usleep(100)
        }
        let seconds = Instant.now().since(started).secondsDouble
        let gatewayCPU = gatewayClock.seconds - gatewayCPUStart
        let senderCPU = senderClock.seconds - senderCPUStart
        stream.shutdown()
        return Result(frames: frameCount, frameLength: frameLength, seconds: seconds,
                      gatewayCPUSeconds: gatewayCPU, senderCPUSeconds: senderCPU)
    }

    /// `count` command-2 frames of `frameLength` bytes, identifiers 1...count.
    static func encodeFrames(count: Int, frameLength: Int) -> [UInt8] {
        let encoder = FrameEncoder(format: .frame)
        let payload = [UInt8](#"{"aps":{"alert":"x"}}"#.utf8)
            + [UInt8](repeating: 0x20, count: frameLength - 61 - 21)
        let token = try! DeviceToken(hex: String(repeating: "7c", count: 32))
        var buffer = [UInt8](repeating: 0, count: count * frameLength)
        buffer.withUnsafeMutableBytes { raw in
            payload.withUnsafeBytes { payloadBytes in
                for index in 0..<count {
                    let slot = UnsafeMutableRawBufferPointer(rebasing: raw[index * frameLength..<(index + 1) * frameLength])
                    _ = try! encoder.encode(token: token, payload: payloadBytes, identifier: UInt32(index + 1),
                                            expiry: 0, priority: 10, into: slot)
                }
            }
        }
        return buffer
    }
}

/// A thread's CPU-time clock, readable from any thread.
struct ThreadClock: Sendable {
    let id: clockid_t

    /// The calling thread's clock.
    static func current() -> ThreadClock {
        var id = clockid_t()
        pthread_getcpuclockid(pthread_self(), &id)
        return ThreadClock(id: id)
    }

    var seconds: Double {
        var time = timespec()
        clock_gettime(id, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
