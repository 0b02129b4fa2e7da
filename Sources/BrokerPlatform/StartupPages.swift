#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Unmaps the pages of code and read-only data that start-up mapped and the running daemon does not use.
///
/// Why: measured on an idle brokerd, 14.5 of its 16.8 MiB resident were pages of the executable and of the shared
/// libraries, mapped by start-up (argument parsing, configuration, key store, SQLite schema, the cache load, the D-Bus
/// probe) and by the kernel's fault-around (it maps up to 64 KiB around every page touched). Most of that code never
/// runs again. `MADV_DONTNEED` on a read-only private file mapping only drops this process's page-table entries: the
/// pages stay in the page cache, and whatever runs later (a request) maps its own pages back in with a minor fault.
///
/// Only mappings that are backed by a file, not writable, and hold no private (anonymous) page are released: a
/// read-only mapping can still hold pages written before it was made read-only (relocations, RELRO), and those
/// would be lost. Writable mappings, the heap and stacks are never touched.
public enum StartupPages {
    public struct Released: Sendable {
        public var residentBefore: Int  // bytes
        public var residentAfter: Int
        public var mappings: Int
    }

    public static func release() -> Released {
        let before = residentBytes()
        var mappings = 0
        for range in releasableRanges() where madvise(UnsafeMutableRawPointer(bitPattern: range.lowerBound),
                                                      Int(range.upperBound - range.lowerBound), MADV_DONTNEED) == 0 {
            mappings += 1
        }
        return Released(residentBefore: before, residentAfter: residentBytes(), mappings: mappings)
    }

    /// The address ranges of /proc/self/smaps that are file-backed, read-only (r--p, r-xp), with no anonymous page.
    static func releasableRanges() -> [Range<UInt>] {
        guard let text = readFile("/proc/self/smaps") else { return [] }
        var ranges: [Range<UInt>] = []
        var candidate: Range<UInt>?
        for line in text.split(separator: UInt8(ascii: "\n")) {
            if let first = line.first, isHexDigit(first), let mapping = parseMappingHeader(line) {
                candidate = mapping
                continue
            }
            guard let range = candidate, line.starts(with: "Anonymous:".utf8) else { continue }
            let kib = line.dropFirst("Anonymous:".utf8.count).filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            if kib.elementsEqual("0".utf8) { ranges.append(range) }
            candidate = nil
        }
        return ranges
    }

    /// "start-end perms offset dev inode path": the range when perms are r--p or r-xp and path is a file.
    private static func parseMappingHeader(_ line: ArraySlice<UInt8>) -> Range<UInt>? {
        let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 5, omittingEmptySubsequences: true)
        guard fields.count == 6, fields[0].contains(UInt8(ascii: "-")) else { return nil }
        let perms = Array(fields[1])
        guard perms == Array("r--p".utf8) || perms == Array("r-xp".utf8) else { return nil }
        let path = fields[5].drop { $0 == UInt8(ascii: " ") }
        guard path.first == UInt8(ascii: "/") else { return nil }
        let bounds = fields[0].split(separator: UInt8(ascii: "-"))
        guard bounds.count == 2, let start = UInt(String(decoding: bounds[0], as: UTF8.self), radix: 16),
              let end = UInt(String(decoding: bounds[1], as: UTF8.self), radix: 16), start < end
        else { return nil }
        return start..<end
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
    }

    /// Resident bytes of this process (/proc/self/statm, second field, in pages).
    public static func residentBytes() -> Int {
        guard let text = readFile("/proc/self/statm") else { return 0 }
        let fields = text.split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    private static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
        }
    }
}
