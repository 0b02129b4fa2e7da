import BrokerProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Files a caller names for brokerd to read or write itself (`importCache`/`exportCache` with `path`), so that a
/// document of any size never has to fit in one message. The caller is already known to run as brokerd's user
/// (SO_PEERCRED); these checks keep brokerd from being used on files that user does not own: the file (or, for an
/// export, its directory) must belong to the user, and symbolic links are not followed at the last component.
enum CallerFiles {
    static let maximumImportBytes = 4 << 30

    static func failure(_ message: String) -> RPCError {
        RPCError.invalidParams(message, reason: "fileRefused")
    }

    static func requireAbsolute(_ path: String) throws {
        guard path.hasPrefix("/") else { throw failure("'path' must be absolute: \(path)") }
    }

    static func read(_ path: String) throws -> [UInt8] {
        try requireAbsolute(path)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw failure("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { throw failure("\(path) is not a regular file") }
        guard info.st_uid == geteuid() else { throw failure("\(path) belongs to another user (uid \(info.st_uid))") }
        guard info.st_size <= maximumImportBytes else { throw failure("\(path) is larger than \(maximumImportBytes) bytes") }
        // Read into memory not zeroed first: a document may be hundreds of megabytes, each byte written by the read.
        return try [UInt8](unsafeUninitializedCapacity: Int(info.st_size)) { buffer, initialized in
            while initialized < buffer.count {
                let got = Glibc.read(fd, buffer.baseAddress! + initialized, buffer.count - initialized)
                if got < 0, errno == EINTR { continue }
                guard got > 0 else { throw failure("cannot read \(path): \(got < 0 ? String(cString: strerror(errno)) : "it shrank")") }
                initialized += got
            }
        }
    }

    /// Writes through `produce` into a new file beside `path` (0600), then renames it over `path`: a reader never
    /// sees half a document, and a failed export leaves what was there.
    static func write(_ path: String, _ produce: (([UInt8]) throws -> Void) throws -> Void) throws -> Int {
        try requireAbsolute(path)
        let directory = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "/"
        var info = stat()
        guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { throw failure("no directory \(directory)") }
        // The user's own directory, or a sticky one such as /tmp where nobody can replace what we create.
        guard info.st_uid == geteuid() || info.st_mode & S_ISVTX != 0 else {
            throw failure("\(directory) belongs to another user (uid \(info.st_uid))")
        }
        if lstat(path, &info) == 0, info.st_mode & S_IFMT != S_IFREG || info.st_uid != geteuid() {
            throw failure("\(path) exists and is not a regular file of this user")
        }
        let temporary = "\(path).tmp-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw failure("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var written = 0
        var problem: Error?
        do {
            try produce { chunk in
                var done = 0
                while done < chunk.count {
                    let wrote = chunk.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
                    if wrote < 0, errno == EINTR { continue }
                    guard wrote > 0 else { throw failure("cannot write \(temporary): \(String(cString: strerror(errno)))") }
                    done += wrote
                }
                written += chunk.count
            }
            if fsync(fd) != 0 { throw failure("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        } catch {
            problem = error
        }
        close(fd)
        if problem == nil, rename(temporary, path) != 0 {
            problem = failure("cannot rename onto \(path): \(String(cString: strerror(errno)))")
        }
        if let problem {
            unlink(temporary)
            throw problem
        }
        return written
    }
}
