import CBrokerPlatform

/// Process-level hardening.
public enum ProcessHardening {
    /// No core dumps and no ptrace attach by other processes of the same user (ssh-agent does the same).
    @discardableResult
    public static func makeNonDumpable() -> Bool {
        brokerd_set_nondumpable() == 0
    }

    public static var isDumpable: Bool { brokerd_is_dumpable() != 0 }
}
