/// How the HTTP/2 mock breaks the protocol on purpose, on every connection: what a broken
/// or hostile gateway does, for testing that a sender ends such a run in bounded time with
/// everything accounted for.
public enum H2Misbehaviour: String, Sendable, Hashable, CaseIterable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS 0, never raised: no request can start.
    case zeroStreams = "zero-streams"
    /// Every answer starts (HEADERS 200 and some DATA) and never ends.
    case endlessAnswer = "endless-answer"
    /// Bytes that are no HTTP/2 frame (an HTTP/1.1 answer) right after its SETTINGS.
    case garbage
    /// After its SETTINGS, a frame header announcing a 16 MB frame.
    case hugeFrame = "huge-frame"
    /// The TLS handshake completes, and then nothing: no SETTINGS, no answer.
    case noSettings = "no-settings"
    /// The answer to the first request is a header block that never ends: HEADERS without
    /// END_HEADERS, then CONTINUATION frames, 4 MiB of them.
    case continuationFlood = "continuation-flood"
    /// A hundred PINGs for every read of the client's bytes, beside correct answers.
    case pingFlood = "ping-flood"
}
