import AppIdentityParsing

/// What a caller's process shows brokerd, which the caller may have written: a `/.flatpak-info` (any bytes), an LSM
/// label and a cgroup. Classifying never traps; a Flatpak identity always names a valid app ID; a broken file never
/// makes a host process; and the printable name reads back as the same app.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAppIdentity(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    let caller = CallerIdentity.classify(uid: 1000, pid: 42, pinnedBy: "fuzz", executable: "/usr/bin/fuzz", cgroup: text,
                                         securityLabel: nil, root: .flatpakInfo(bytes))
    switch caller.sandbox {
    case .flatpak(let appId, let instance):
        require(!appId.isEmpty && !instance.isEmpty && caller.failure == nil, "a Flatpak identity without its ID")
        require(AppID(parsing: caller.app.description) == caller.app, "flatpak:ID does not read back")
    case .snap:
        fatalError("a .flatpak-info without a label made a snap")
    case .none:
        require(caller.failure != nil || !caller.notes.isEmpty, "a .flatpak-info that is no Flatpak's made a plain host process")
    }
    let labelled = CallerIdentity.classify(uid: 1000, pid: 42, pinnedBy: nil, executable: nil, cgroup: nil, securityLabel: text,
                                           root: .noFlatpakInfo)
    if case .snap(let name, _) = labelled.sandbox {
        require(text.hasPrefix("snap.") && !name.isEmpty, "a label that is no snap's made a snap")
    }
    _ = AppID(parsing: text).map { AppID(parsing: $0.description) == $0 }
    return 0
}

/// A broken invariant, reported with its message (a release build's `precondition` traps without one).
private func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
    if !condition { fatalError(message()) }
}
