#if canImport(Glibc)
import Glibc
#endif

/// Runs libFuzzer with `target` as the function under test, passing it the command line,
/// and exits with its status.
///
/// Each fuzzer is a SwiftPM executable whose `main.swift` calls this: SwiftPM gives every
/// executable its own `main`, so the fuzzer starts libFuzzer's driver from there instead of
/// linking libFuzzer's `main`. Build with `-sanitize=fuzzer` (Tests/Fuzz/fuzz.sh does).
public func runFuzzer(_ target: @escaping (UnsafeRawBufferPointer) -> Void) -> Never {
    fuzzTarget = target
    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    let status = LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        fuzzTarget!(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
    exit(status)
}

/// The function under test; libFuzzer calls it from one thread only.
nonisolated(unsafe) private var fuzzTarget: ((UnsafeRawBufferPointer) -> Void)?

@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32
