import BrokerProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A request line that was answered from the cache, kept as a pattern for the next line: an app that asks for its
/// token again sends the same line with another id (and perhaps another correlation id). Such a line is recognised
/// by comparing bytes with the pattern around those two values, without the scan and the key that
/// `RequestLineShape` makes (most of the cost of a repeated request, measured).
///
/// Why a match is the same request: the pattern is a line that parsed as a valid request, and its shape found where
/// its id and correlation id values lie. A line that is the pattern byte for byte except that each of those values is
/// another complete scalar (checked here: a plain integer or a string without escapes for the id, a string without
/// escapes or null for the correlation id) is the same JSON with those two values replaced.
public struct RepeatedRequestPattern: Sendable {
    private let line: [UInt8]
    private let idRange: Range<Int>
    private let correlationIdRange: Range<Int>?
    /// The pattern's own id: many clients send the same id every time.
    private let id: String

    /// The values of a matching line: the id as its JSON text (as `RPCEnvelope` keeps it), the correlation id as its
    /// string value (nil for none).
    public struct Values {
        public var id: String
        public var correlationId: String?
    }

    /// `shape` must have been made from `line`.
    public init(line: [UInt8], shape: RequestLineShape) {
        self.line = line
        idRange = shape.idRange
        correlationIdRange = shape.correlationIdRange
        id = String(decoding: line[shape.idRange], as: UTF8.self)
    }

    /// The id and correlation id of `candidate` (a line without its newline) when it is this request asked again;
    /// nil when it differs anywhere else, or when a value is one this comparison does not take (the caller then
    /// reads the line the usual way).
    public func match(_ candidate: UnsafeRawBufferPointer) -> Values? {
        guard let base = candidate.baseAddress, candidate.count > 0 else { return nil }
        return line.withUnsafeBytes { pattern -> Values? in
            var values = Values(id: "", correlationId: nil)
            var inPattern = 0, inCandidate = 0
            /// Compares up to `cut` and reads the candidate's value in its place; false at the first difference.
            func take(_ cut: Range<Int>, isId: Bool) -> Bool {
                let same = cut.lowerBound - inPattern
                guard candidate.count - inCandidate >= same,
                      memcmp(base + inCandidate, pattern.baseAddress! + inPattern, same) == 0,
                      let end = Self.valueEnd(candidate, from: inCandidate + same) else { return false }
                let value = UnsafeRawBufferPointer(rebasing: candidate[(inCandidate + same)..<end])
                if isId {
                    if value.count == idRange.count,
                       memcmp(value.baseAddress!, pattern.baseAddress! + idRange.lowerBound, value.count) == 0 {
                        values.id = id
                    } else {
                        guard let id = Self.id(value) else { return false }
                        values.id = id
                    }
                } else {
                    guard let correlationId = Self.correlationId(value) else { return false }
                    values.correlationId = correlationId
                }
                inCandidate = end
                inPattern = cut.upperBound
                return true
            }
            if let correlation = correlationIdRange, correlation.lowerBound < idRange.lowerBound {
                guard take(correlation, isId: false), take(idRange, isId: true) else { return nil }
            } else {
                guard take(idRange, isId: true) else { return nil }
                if let correlation = correlationIdRange, !take(correlation, isId: false) { return nil }
            }
            let rest = pattern.count - inPattern
            guard candidate.count - inCandidate == rest,
                  rest == 0 || memcmp(base + inCandidate, pattern.baseAddress! + inPattern, rest) == 0 else { return nil }
            return values
        }
    }

    /// The shape of `candidate` (a line without its newline) when it is another request of the same app, found
    /// without the scan: it begins as this pattern does, byte for byte, up to the id, whose value is a plain integer
    /// or a string without escapes, the rest has no backslash and no `"id"`, and the line no `"correlationId"`.
    /// Then nothing in the rest can be a key the scan cuts at (a key is written as it is, having no escape), and the
    /// id is the top level's (the pattern's line was scanned up to it): the scan would cut the line at the id alone.
    /// nil otherwise, for the scan to decide. The scan was a third of answering a request the memo holds.
    public func shape(of candidate: [UInt8]) -> RequestLineShape? {
        let start = idRange.lowerBound
        let idEnd = candidate.withUnsafeBytes { bytes -> Int? in
            guard let base = bytes.baseAddress, bytes.count > start else { return nil }
            let prefixMatches = line.withUnsafeBytes { memcmp(base, $0.baseAddress!, start) == 0 }
            guard prefixMatches, let end = Self.valueEnd(bytes, from: start),
                  Self.id(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) != nil else { return nil }
            let rest = UnsafeRawBufferPointer(rebasing: bytes[end...])
            guard rest.isEmpty || memchr(rest.baseAddress!, Int32(UInt8(ascii: "\\")), rest.count) == nil,
                  !Self.holdsCutKey(UnsafeRawBufferPointer(bytes), idFrom: end) else { return nil }
            return end
        }
        return idEnd.map { RequestLineShape(candidate, id: start..<$0, correlationId: nil) }
    }

    /// Whether `"correlationId"` is anywhere in the line (the pattern's may lie before its id), or `"id"` at or after
    /// `idFrom`. Both end in `d"`: eight places at a time are tested for a `d` before a quote (the classic zero-byte
    /// test on the word and on the word a byte on, which may flag a place above a true one: each is checked).
    static func holdsCutKey(_ bytes: UnsafeRawBufferPointer, idFrom: Int) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        let count = bytes.count, ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        while index &+ 9 <= count {
            let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self) ^ (ones &* 0x64)
            let next = base.loadUnaligned(fromByteOffset: index &+ 1, as: UInt64.self) ^ (ones &* 0x22)
            var flags = (word &- ones) & ~word & (next &- ones) & ~next & highs
            while flags != 0 {
                let place = index &+ flags.trailingZeroBitCount &>> 3
                if isCutKey(base, count, endingAt: place, idFrom: idFrom) { return true }
                flags &= flags &- 1
            }
            index &+= 8
        }
        while index &+ 1 < count {
            if isCutKey(base, count, endingAt: index, idFrom: idFrom) { return true }
            index &+= 1
        }
        return false
    }

    /// Whether the `d` at `place` ends `"id"` (at or after `idFrom`) or `"correlationId"`.
    private static func isCutKey(_ base: UnsafeRawPointer, _ count: Int, endingAt place: Int, idFrom: Int) -> Bool {
        let bytes = UnsafeRawBufferPointer(start: base, count: count)
        guard bytes[place] == UInt8(ascii: "d"), bytes[place + 1] == UInt8(ascii: "\"") else { return false }
        let quote = UInt8(ascii: "\"")
        if place - 2 >= idFrom, place >= 2, bytes[place - 2] == quote, bytes[place - 1] == UInt8(ascii: "i") {
            return true
        }
        let head: StaticString = "\"correlationI"
        return place >= head.utf8CodeUnitCount
            && memcmp(base + place - head.utf8CodeUnitCount, head.utf8Start, head.utf8CodeUnitCount) == 0
    }

    /// Past the value that starts at `start`: a string through its closing quote (nil if it has an escape or a
    /// control character, or does not end), anything else through the last byte before one that ends a JSON word.
    private static func valueEnd(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        var index = start
        if bytes[start] == UInt8(ascii: "\"") {
            index += 1
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") { return index + 1 }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
                index += 1
            }
            return nil
        }
        while index < bytes.count, !RequestLineShape.Scanner.ends(bytes[index]) { index += 1 }
        return index > start ? index : nil
    }

    private static func id(_ text: UnsafeRawBufferPointer) -> String? {
        if RequestLineShape.isPlainInteger(text) { return String(decoding: text, as: UTF8.self) }
        guard text.count >= 2, text[0] == UInt8(ascii: "\""), isUTF8(text) else { return nil }
        return String(decoding: text, as: UTF8.self)
    }

    /// `.some(nil)` for null; nil when it is neither null nor a string (a string here has no escapes).
    private static func correlationId(_ text: UnsafeRawBufferPointer) -> String?? {
        if text.elementsEqual("null".utf8) { return .some(nil) }
        guard text.count >= 2, text[0] == UInt8(ascii: "\""), isUTF8(text) else { return nil }
        return .some(String(decoding: UnsafeRawBufferPointer(rebasing: text[1..<(text.count - 1)]), as: UTF8.self))
    }

    private static func isUTF8(_ text: UnsafeRawBufferPointer) -> Bool {
        text.allSatisfy { $0 < 0x80 } || String(validating: text, as: UTF8.self) != nil
    }
}
