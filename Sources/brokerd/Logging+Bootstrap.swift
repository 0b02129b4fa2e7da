import Logging
import Synchronization
import Systemd

#if canImport(Glibc)
import Glibc
#endif

/// The log level, changeable by SIGHUP after logging was bootstrapped. An atomic, not a lock: every log call of
/// every thread reads it (a cache hit's included), and a mutex they all take made 64 busy connections queue on it
/// (perf: a fifth of brokerd's CPU spinning in its slow path).
final class LogLevelBox: Sendable {
    private static let levels = Logger.Level.allCases
    private let index: Atomic<Int>
    init(_ level: Logger.Level) { index = Atomic(Self.levels.firstIndex(of: level) ?? 0) }
    var level: Logger.Level {
        get { Self.levels[index.load(ordering: .relaxed)] }
        set { index.store(Self.levels.firstIndex(of: newValue) ?? 0, ordering: .relaxed) }
    }
}

/// Journald with structured fields when systemd started us (JOURNAL_STREAM names our stderr), stderr otherwise.
func bootstrapLogging(_ levelBox: LogLevelBox) {
    let toJournal = stderrIsJournal()
    LoggingSystem.bootstrap { label in
        let inner: any LogHandler = toJournal
            ? JournalLogHandler(label: label, level: .trace) : StderrLogHandler(label: label, level: .trace)
        return LevelFromBox(inner: inner, levelBox: levelBox)
    }
}

/// systemd sets JOURNAL_STREAM to "<device>:<inode>" of the stream it connected to stderr.
private func stderrIsJournal() -> Bool {
    guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
    let parts = value.split(separator: ":")
    var info = stat()
    guard parts.count == 2, fstat(2, &info) == 0 else { return false }
    return UInt64(parts[0]) == UInt64(info.st_dev) && UInt64(parts[1]) == UInt64(info.st_ino)
}

private struct LevelFromBox: LogHandler {
    var inner: any LogHandler
    let levelBox: LogLevelBox

    var logLevel: Logger.Level {
        get { levelBox.level }
        set { levelBox.level = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        inner.log(event: event)
    }
}
