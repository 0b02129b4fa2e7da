import BrokerConfig

/// A configuration file: any text is read as TOML 1.0 and as brokerd's settings, ending in a value or an error that
/// names a line (never a trap, a stack overflow or an unbounded allocation).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? TOML.parse(text)
    do {
        _ = try BrokerConfiguration.parse(text)
    } catch {
        require(error.line >= 0, "an error without a line")
        _ = error.description
    }
    return 0
}

/// A broken invariant, reported with its message (a release build's `precondition` traps without one).
private func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
