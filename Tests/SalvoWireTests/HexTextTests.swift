import Foundation
import SalvoTestSupport
import Testing
@testable import SalvoWire

/// Hex text eight digits at a time, against Foundation's formatting and parsing, and the
/// two texts made and read with it: an `apns-id` and a device token.
@Suite struct HexTextTests {
    static let values: [UInt64] = {
        var random = SplitMix64(seed: 41)
        return [0, .max, 0x0123_4567_89AB_CDEF, 0xA0A0_A0A0_0909_0909, 0xFFFF_0000_FFFF_0000]
            + (0..<1000).map { _ in random.next() }
    }()

    @Test func eightDigitsAreTheValueInLowercaseHex() {
        for value in Self.values {
            for half in [UInt32(truncatingIfNeeded: value), UInt32(truncatingIfNeeded: value >> 32)] {
                var text = [UInt8](repeating: 0, count: 8)
                text.withUnsafeMutableBytes { HexText.write(half, to: $0.baseAddress!) }
                #expect(String(decoding: text, as: UTF8.self) == String(format: "%08x", half))
            }
        }
    }

    @Test func eightDigitsOfEitherCaseReadBackAndAnythingElseDoesNot() {
        for value in Self.values {
            let half = UInt32(truncatingIfNeeded: value)
            for text in [String(format: "%08x", half), String(format: "%08X", half)] {
                let parsed = Array(text.utf8).withUnsafeBytes { HexText.parseEight($0.baseAddress!) }
                #expect(parsed?.byteSwapped == half, "\(text)")
            }
        }
        // Every byte that is not a digit, in every place.
        let digits = Set("0123456789abcdefABCDEF".utf8)
        for byte in UInt8.min...UInt8.max where !digits.contains(byte) {
            for place in 0..<8 {
                var text = Array("0123abCD".utf8)
                text[place] = byte
                #expect(text.withUnsafeBytes { HexText.parseEight($0.baseAddress!) } == nil, "\(byte) at \(place)")
            }
        }
    }

    @Test func anAPNsIDIsWrittenAsItsCanonicalTextAndReadBackInEitherCase() {
        for (high, low) in zip(Self.values, Self.values.reversed()) {
            let id = APNsID(high: high, low: low)
            let hex = String(format: "%016llx", high) + String(format: "%016llx", low)
            let digits = Array(hex)
            let canonical = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(digits[$0]) }.joined(separator: "-")
            #expect(id.description == canonical)
            #expect(APNsID(canonical) == id)
            #expect(APNsID(canonical.uppercased()) == id)
        }
    }

    @Test func anAPNsIDWithABadCharacterAnywhereIsNone() {
        let good = Array("123e4567-e89b-12d3-a456-426614174000".utf8)
        #expect(good.withUnsafeBytes { APNsID(text: $0) } != nil)
        for place in good.indices {
            for byte: UInt8 in [UInt8(ascii: "g"), UInt8(ascii: "-"), UInt8(ascii: "0"), 0x00, 0xC3] where byte != good[place] {
                var text = good
                text[place] = byte
                // A hyphen's place takes only a hyphen; a digit's any hex digit.
                let valid = [8, 13, 18, 23].contains(place) ? byte == UInt8(ascii: "-") : byte == UInt8(ascii: "0")
                #expect((text.withUnsafeBytes { APNsID(text: $0) } != nil) == valid, "\(byte) at \(place)")
            }
        }
        #expect(Array(good.dropLast()).withUnsafeBytes { APNsID(text: $0) } == nil)
    }

    @Test func aDeviceTokenIsWrittenAsItsSixtyFourDigits() throws {
        for start in stride(from: 0, to: Self.values.count - 4, by: 4) {
            let bytes = Self.values[start..<start + 4].flatMap { withUnsafeBytes(of: $0.bigEndian, Array.init) }
            let token = try bytes.withUnsafeBytes { bytes throws(DeviceTokenError) in try DeviceToken(bytes: bytes) }
            #expect(token.hex == bytes.map { String(format: "%02x", $0) }.joined())
            #expect(try DeviceToken(hex: token.hex.uppercased()) == token)
        }
    }
}
