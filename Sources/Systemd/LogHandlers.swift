import CSystemd
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Sends log records to journald with structured fields (sd_journal_sendv): MESSAGE, PRIORITY,
/// SYSLOG_IDENTIFIER, CODE_FILE/LINE/FUNC, and each metadata key as an upper-case BROKER_* field.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let identifier: String

    public init(label: String, identifier: String = "brokerd", level: Logger.Level) {
        self.identifier = identifier
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var explicit = event.metadata
        if let error = event.error { explicit = (explicit ?? [:]).merging(["error": "\(error)"], uniquingKeysWith: { $1 }) }
        emit(level: event.level, message: event.message, metadata: explicit,
             file: event.file, function: event.function, line: event.line)
    }

    private func emit(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?,
                      file: String, function: String, line: UInt) {
        var fields = [
            "MESSAGE=\(message)",
            "PRIORITY=\(Self.priority(level))",
            "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(file)", "CODE_LINE=\(line)", "CODE_FUNC=\(function)",
        ]
        for (key, value) in metadata.merging(explicit ?? [:], uniquingKeysWith: { $1 }) {
            fields.append("BROKER_\(Self.fieldName(key))=\(value)")
        }
        var storage = fields.map { Array($0.utf8) }
        var vectors: [iovec] = []
        for index in storage.indices {
            storage[index].withUnsafeMutableBytes { raw in
                vectors.append(iovec(iov_base: raw.baseAddress, iov_len: raw.count))
            }
        }
        // The arrays in `storage` are not mutated again, so the pointers taken above stay valid for this call.
        withExtendedLifetime(storage) {
            _ = sd_journal_sendv(vectors, Int32(vectors.count))
        }
    }

    static func fieldName(_ key: String) -> String {
        String(key.uppercased().map { ($0.isLetter || $0.isNumber) && $0.isASCII ? $0 : "_" })
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }
}

/// One line per record on stderr: `<time> <level> <message> key=value…` (for runs outside systemd).
public struct StderrLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String

    public init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var explicit = event.metadata
        if let error = event.error { explicit = (explicit ?? [:]).merging(["error": "\(error)"], uniquingKeysWith: { $1 }) }
        emit(level: event.level, message: event.message, metadata: explicit,
             file: event.file, function: event.function, line: event.line)
    }

    private func emit(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?,
                      file: String, function: String, line: UInt) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var tm = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &tm)
        let stamp = String(format2: tm.tm_hour) + ":" + String(format2: tm.tm_min) + ":" + String(format2: tm.tm_sec)
            + "." + String(String(now.tv_nsec / 1_000_000 + 1000).dropFirst())
        var text = "\(stamp) \(level) \(label): \(message)"
        let merged = metadata.merging(explicit ?? [:], uniquingKeysWith: { $1 })
        for key in merged.keys.sorted() { text += " \(key)=\(merged[key]!)" }
        text += "\n"
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { _ = write(2, $0.baseAddress, $0.count) }
    }
}

extension String {
    init(format2 value: Int32) {
        self = value < 10 ? "0\(value)" : "\(value)"
    }
}
