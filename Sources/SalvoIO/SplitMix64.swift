/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fast generator for decisions that must
/// look random yet replay exactly from a seed — backoff jitter, failure plans.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The next draw mapped to [0, 1).
    public mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// One draw keyed by `seed` and `key`: a stateless hash, so concurrent decisions need
    /// no shared generator.
    public static func draw(seed: UInt64, key: UInt64) -> UInt64 {
        var generator = SplitMix64(seed: seed ^ (key &* 0xD1B5_4A32_D192_ED03))
        return generator.next()
    }

    /// A keyed draw mapped to [0, 1).
    public static func unit(seed: UInt64, key: UInt64) -> Double {
        Double(draw(seed: seed, key: key) >> 11) * 0x1p-53
    }
}
