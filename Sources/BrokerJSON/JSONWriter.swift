/// Writes `JSONValue`s as UTF-8 JSON text. Compact output never contains a raw newline (the JSON-RPC framing
/// relies on that); `indent` gives the layout msal-python writes (4 spaces) for cache files.
public struct JSONWriter {
    public var indent: Int?

    public init(indent: Int? = nil) {
        self.indent = indent
    }

    public func string(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        write(value, into: &out, level: 0)
        return String(decoding: out, as: UTF8.self)
    }

    public func bytes(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        write(value, into: &out, level: 0)
        return out
    }

    public func write(_ value: JSONValue, into out: inout [UInt8], level: Int) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.utf8)
        case .string(let s): Self.writeString(s, into: &out)
        case .raw(let r):
            if indent == nil, r.utf8.contains(0x0A) {
                // Keep the framing invariant even for verbatim values: re-emit them compactly.
                // Verbatim values come from JSONReader, so they parse; `null` keeps the output JSON if one does not.
                if let parsed = try? JSONReader.parse(r, lenient: true) {
                    write(parsed, into: &out, level: level)
                } else {
                    out.append(contentsOf: "null".utf8)
                }
            } else {
                out.append(contentsOf: r.utf8)
            }
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, level + 1)
                write(element, into: &out, level: level + 1)
            }
            if !elements.isEmpty { newline(&out, level) }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (i, member) in object.members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, level + 1)
                Self.writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                if indent != nil { out.append(UInt8(ascii: " ")) }
                write(member.value, into: &out, level: level + 1)
            }
            if !object.members.isEmpty { newline(&out, level) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private func newline(_ out: inout [UInt8], _ level: Int) {
        guard let indent else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent * level))
    }

    public static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings (tokens, ids, URLs) need no escape: copied whole, not byte by byte.
        if string.utf8.withContiguousStorageIfAvailable({ !containsByteToEscape($0) }) == true {
            out.append(contentsOf: string.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                        hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    public static func quoted(_ string: String) -> String {
        var out: [UInt8] = []
        writeString(string, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
