import Logging

extension Logger {
    /// A logger that drops everything, whatever the logging system: the default of the
    /// pieces that log only when given one (the engine's tests, the benchmarks).
    public static let disabled = Logger(label: "salvo.disabled") { _ in SwiftLogNoOpLogHandler() }
}
