import Foundation
import SalvoTestSupport
import Testing
@testable import SalvoWire

/// The eight-digits-at-a-time hex writer against Foundation's formatting, and the two texts
/// made with it: an `apns-id` and a device token.
@Suite struct LowercaseHexTests {
    static let values: [UInt64] = {
        var random = SplitMix64(seed: 41)
        return [0, .max, 0x0123_4567_89AB_CDEF, 0xA0A0_A0A0_0909_0909, 0xFFFF_0000_FFFF_0000]
            + (0..<1000).map { _ in random.next() }
    }()

    @Test func eightDigitsAreTheValueInLowercaseHex() {
        for value in Self.values {
            for half in [UInt32(truncatingIfNeeded: value), UInt32(truncatingIfNeeded: value >> 32)] {
                var text = [UInt8](repeating: 0, count: 8)
                text.withUnsafeMutableBytes { LowercaseHex.write(half, to: $0.baseAddress!) }
                #expect(String(decoding: text, as: UTF8.self) == String(format: "%08x", half))
            }
        }
    }

    @Test func anAPNsIDIsWrittenAsItsCanonicalTextAndReadBack() {
        for (high, low) in zip(Self.values, Self.values.reversed()) {
            let id = APNsID(high: high, low: low)
            let hex = String(format: "%016llx", high) + String(format: "%016llx", low)
            let digits = Array(hex)
            let canonical = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(digits[$0]) }.joined(separator: "-")
            #expect(id.description == canonical)
            #expect(APNsID(id.description) == id)
        }
    }

    @Test func aDeviceTokenIsWrittenAsItsSixtyFourDigits() throws {
        for start in stride(from: 0, to: Self.values.count - 4, by: 4) {
            let bytes = Self.values[start..<start + 4].flatMap { withUnsafeBytes(of: $0.bigEndian, Array.init) }
            let token = try bytes.withUnsafeBytes { bytes throws(DeviceTokenError) in try DeviceToken(bytes: bytes) }
            #expect(token.hex == bytes.map { String(format: "%02x", $0) }.joined())
        }
    }
}
