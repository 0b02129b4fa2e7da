/// The canonical wire text of a JSON text — what `JSONWriter.writeCanonicalWire` writes for the value
/// `JSONReader.parse` reads from it — made from the bytes, without the value in between, for the texts id tokens
/// carry: strings of printable ASCII without escapes, integers of up to 18 digits, `true`, `false`, `null`, and
/// arrays and objects of those whose keys all differ. Any other text gives nil, and the caller takes the value's
/// way, which also decides whether the text is JSON at all.
///
/// Why: an account's first answer writes its id token's claims. Reading them into a tree (a String per key and per
/// value) and writing the tree again sorted was a quarter of that first hit; this is a scan and a sort of ranges.
public enum CanonicalJSONText {
    /// Deeper texts give nil (JSONReader reads to 256; id tokens nest two or three levels).
    public static let maximumDepth = 32

    public static func of(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var scanner = Scanner(bytes: bytes)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        guard scanner.value(into: &out, depth: 0) else { return nil }
        scanner.skipWhitespace()
        return scanner.position == bytes.count ? out : nil
    }

    public static func of(_ bytes: [UInt8]) -> [UInt8]? {
        bytes.withUnsafeBufferPointer { of($0) }
    }

    private struct Scanner {
        private var maximumDepth: Int { CanonicalJSONText.maximumDepth }
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        private var next: UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func skipWhitespace() {
            while let byte = next, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
        }

        /// Writes the value that starts here (after whitespace) in canonical form; false when it is outside the
        /// forms above (or not JSON).
        mutating func value(into out: inout [UInt8], depth: Int) -> Bool {
            skipWhitespace()
            guard let byte = next else { return false }
            switch byte {
            case UInt8(ascii: "{"): return depth < maximumDepth && object(into: &out, depth: depth + 1)
            case UInt8(ascii: "["): return depth < maximumDepth && array(into: &out, depth: depth + 1)
            case UInt8(ascii: "\""):
                guard let content = string() else { return false }
                appendQuoted(content, to: &out)
                return true
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return integer(into: &out)
            case UInt8(ascii: "t"): return literal("true", into: &out)
            case UInt8(ascii: "f"): return literal("false", into: &out)
            case UInt8(ascii: "n"): return literal("null", into: &out)
            default: return false
            }
        }

        /// The content of the string that starts here, when it is printable ASCII with no backslash: written as it
        /// is read (`writeWireString` escapes only quotes, backslashes and control characters).
        private mutating func string() -> Range<Int>? {
            let start = position + 1
            var index = start
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    position = index + 1
                    return start..<index
                }
                // 0x20...0x7E, less the backslash: one subtraction tests both ends.
                guard byte &- 0x20 < 0x5F, byte != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            return nil
        }

        /// An integer whose literal is the one `String(Int64(literal))` gives back: no leading zero, no `-0`, at most
        /// 18 digits; a fraction or an exponent gives false (the canonical form of those is the encoder's).
        private mutating func integer(into out: inout [UInt8]) -> Bool {
            let start = position
            if next == UInt8(ascii: "-") { position += 1 }
            let digitsStart = position
            while let byte = next, byte &- UInt8(ascii: "0") < 10 { position += 1 }
            let digits = position - digitsStart
            guard (1...18).contains(digits) else { return false }
            if bytes[digitsStart] == UInt8(ascii: "0"), digits > 1 || digitsStart > start { return false }
            if let byte = next, byte == UInt8(ascii: ".") || byte | 0x20 == UInt8(ascii: "e") { return false }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<position]))
            return true
        }

        private mutating func literal(_ word: StaticString, into out: inout [UInt8]) -> Bool {
            let count = word.utf8CodeUnitCount
            guard bytes.count - position >= count else { return false }
            let text = UnsafeBufferPointer(start: word.utf8Start, count: count)
            guard UnsafeBufferPointer(rebasing: bytes[position..<(position + count)]).elementsEqual(text) else {
                return false
            }
            position += count
            out.append(contentsOf: text)
            return true
        }

        private mutating func array(into out: inout [UInt8], depth: Int) -> Bool {
            position += 1
            out.append(UInt8(ascii: "["))
            skipWhitespace()
            if next == UInt8(ascii: "]") {
                position += 1
                out.append(UInt8(ascii: "]"))
                return true
            }
            while true {
                guard value(into: &out, depth: depth) else { return false }
                skipWhitespace()
                switch next {
                case UInt8(ascii: ","):
                    position += 1
                    out.append(UInt8(ascii: ","))
                case UInt8(ascii: "]"):
                    position += 1
                    out.append(UInt8(ascii: "]"))
                    return true
                default:
                    return false
                }
            }
        }

        /// Members are written to a scratch array as they come, then copied out in key order (UTF-8 byte order, as
        /// `ObjectBox.order` sorts). Two equal keys give false: which one wins is the encoder's rule to apply.
        private mutating func object(into out: inout [UInt8], depth: Int) -> Bool {
            position += 1
            skipWhitespace()
            if next == UInt8(ascii: "}") {
                position += 1
                out.append(contentsOf: [UInt8(ascii: "{"), UInt8(ascii: "}")])
                return true
            }
            var members: [(key: Range<Int>, value: Range<Int>)] = []
            members.reserveCapacity(16)
            var values: [UInt8] = []
            values.reserveCapacity(bytes.count - position)
            while true {
                skipWhitespace()
                guard next == UInt8(ascii: "\""), let key = string() else { return false }
                skipWhitespace()
                guard next == UInt8(ascii: ":") else { return false }
                position += 1
                let start = values.count
                guard value(into: &values, depth: depth) else { return false }
                members.append((key, start..<values.count))
                skipWhitespace()
                guard let byte = next else { return false }
                position += 1
                if byte == UInt8(ascii: ",") { continue }
                guard byte == UInt8(ascii: "}") else { return false }
                break
            }
            let bytes = self.bytes
            func keyBytes(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> {
                UnsafeBufferPointer(rebasing: bytes[range])
            }
            members.sort { keyBytes($0.key).lexicographicallyPrecedes(keyBytes($1.key)) }
            for index in members.indices.dropFirst()
            where keyBytes(members[index - 1].key).elementsEqual(keyBytes(members[index].key)) {
                return false
            }
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                appendQuoted(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: values[member.value])
            }
            out.append(UInt8(ascii: "}"))
            return true
        }

        private func appendQuoted(_ content: Range<Int>, to out: inout [UInt8]) {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[content]))
            out.append(UInt8(ascii: "\""))
        }
    }
}
