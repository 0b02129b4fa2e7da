import CBrokerPlatform

/// The C heap of a long-running daemon with a few threads (glibc's malloc).
public enum ProcessMemory {
    /// Four malloc arenas instead of up to 8 per core: call before threads start. With two, the threads that load a
    /// large cache together (CacheStore.loadAll, CacheAssembler.finish) often shared one arena and waited on its lock:
    /// about 90,000 context switches and a second more for a load of 100,000 tokens, in half of the starts. Four
    /// measured the same RSS, idle and loaded.
    public static func limitArenas() {
        _ = brokerd_limit_malloc_arenas()
    }

    /// Returns freed heap to the system, after work that allocated a lot for a short time (an import or export of a
    /// large document): otherwise the daemon keeps that peak as its RSS.
    public static func trim() {
        _ = brokerd_trim_heap()
    }
}
