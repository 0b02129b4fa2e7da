#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A POSIX failure with the operation and path it concerned.
public struct FileError: Error, Sendable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var code: Int32

    public init(operation: String, path: String, code: Int32) {
        (self.operation, self.path, self.code) = (operation, path, code)
    }

    public var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
}

/// Whole-file reads and crash-safe replacement.
///
/// `replace` writes a temporary file in the same directory, fsyncs it, renames it over the target and fsyncs the
/// directory, so that after a crash at any instant the path holds either the old or the new content, never a mix.
public enum AtomicFile {
    public static func read(_ path: String) throws(FileError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw FileError(operation: "open", path: path, code: errno)
        }
        defer { close(fd) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(operation: "read", path: path, code: errno)
            }
            if n == 0 { break }
            result.append(contentsOf: chunk[0..<n])
        }
        return result
    }

    public static func replace(_ path: String, with bytes: [UInt8], mode: mode_t = 0o600) throws(FileError) {
        let directory = parentDirectory(of: path)
        var suffix = SystemRandomNumberGenerator()
        let temporary = "\(path).tmp-\(getpid())-\(String(suffix.next() as UInt32, radix: 16))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw FileError(operation: "create", path: temporary, code: errno) }
        var failure: FileError?
        var written = 0
        bytes.withUnsafeBytes { buffer in
            while written < buffer.count {
                let n = write(fd, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = FileError(operation: "write", path: temporary, code: errno)
                    return
                }
                written += n
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = FileError(operation: "fsync", path: temporary, code: errno) }
        close(fd)
        if failure == nil, rename(temporary, path) != 0 { failure = FileError(operation: "rename", path: path, code: errno) }
        if let failure {
            unlink(temporary)
            throw failure
        }
        try syncDirectory(directory)
    }

    public static func syncDirectory(_ directory: String) throws(FileError) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError(operation: "open", path: directory, code: errno) }
        defer { close(fd) }
        if fsync(fd) != 0 { throw FileError(operation: "fsync", path: directory, code: errno) }
    }

    /// Renames a file that cannot be used, with its `companions` (files named `path` + suffix, such as SQLite's
    /// `-wal` and `-shm`), to `<path>.<reason>-<unix time>` (plus each suffix) and returns the new name. Companions
    /// go first: stopped half-way, `path` is left without them (what a clean close leaves), never a companion whose
    /// file is gone. No existing file is replaced.
    public static func moveAside(_ path: String, reason: String, companions: [String] = []) throws(FileError) -> String {
        guard exists(path) else { throw FileError(operation: "move aside", path: path, code: ENOENT) }
        var destination = "\(path).\(reason)-\(time(nil))"
        var attempt = 1
        while ([""] + companions).contains(where: { exists(destination + $0) }) {
            attempt += 1
            destination = "\(path).\(reason)-\(time(nil))-\(attempt)"
        }
        for suffix in companions + [""] where exists(path + suffix) {
            if rename(path + suffix, destination + suffix) != 0 {
                throw FileError(operation: "rename to \(destination + suffix)", path: path + suffix, code: errno)
            }
        }
        try syncDirectory(parentDirectory(of: path))
        return destination
    }

    /// Creates `path` and missing parents with `mode`; an existing directory keeps its mode unless `enforce`.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700, enforce: Bool = false) throws(FileError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, mode) != 0 && errno != EEXIST {
                throw FileError(operation: "mkdir", path: current, code: errno)
            }
        }
        if enforce, chmod(path, mode) != 0 { throw FileError(operation: "chmod", path: path, code: errno) }
    }

    public static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    /// Whether anything is at `path`, a dangling symbolic link included (lstat): a name that is taken, whatever it
    /// points to, is never overwritten.
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The names in `directory` (without `.` and `..`), in no order; none when it cannot be read.
    public static func names(in directory: String) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }
}
