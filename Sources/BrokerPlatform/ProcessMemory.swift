import CBrokerPlatform

/// The C heap of a long-running daemon with a few threads (glibc's malloc).
public enum ProcessMemory {
    /// Two malloc arenas instead of up to 8 per core: call before threads start.
    public static func limitArenas() {
        _ = brokerd_limit_malloc_arenas()
    }

    /// Returns freed heap to the system, after work that allocated a lot for a short time (an import or export of a
    /// large document): otherwise the daemon keeps that peak as its RSS.
    public static func trim() {
        _ = brokerd_trim_heap()
    }
}
