import BrokerJSON

/// A token result's JSON text with its correlation id left open: the answer to a request that repeats an earlier
/// one is this text with the new request's correlation id put in, byte for byte what encoding the whole result
/// with that id gives (`ProtocolCoding.encode`), without encoding it again.
///
/// Keys are sorted, so `correlationId` has one fixed place: the text is kept as the part before it and the part
/// after it.
public struct TokenResultText: Sendable {
    private let head: [UInt8]  // "{" and the members before correlationId
    private let tail: [UInt8]  // the members after it and "}"

    public init(_ result: TokenResult) throws {
        var result = result
        result.correlationId = nil
        guard case .object(let object) = try JSONValueEncoder().encode(result) else {
            throw EncodingError.invalidValue(result, .init(codingPath: [], debugDescription: "a token result is an object"))
        }
        let key = Array("correlationId".utf8)
        let split = object.members.firstIndex { !Array($0.key.utf8).lexicographicallyPrecedes(key) } ?? object.members.count
        var head = JSONWriter.wireBytes(.object(JSONObject(Array(object.members[..<split]))))
        head.removeLast()
        var tail = JSONWriter.wireBytes(.object(JSONObject(Array(object.members[split...]))))
        tail.removeFirst()
        self.head = head
        self.tail = tail
    }

    public func json(correlationId: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(head.count + tail.count + (correlationId?.utf8.count ?? 0) + 20)
        write(correlationId: correlationId, into: &out)
        return out
    }

    /// The whole answer line (without its newline): what `RPCEnvelope.success` makes of `json(correlationId:)`,
    /// written in one buffer.
    public func answerLine(id: String, correlationId: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(answerLineCapacity(id: id, correlationId: correlationId))
        writeAnswerLine(id: id, correlationId: correlationId) { out += $0 }
        return out
    }

    /// Room for the answer line and its newline (a correlation id with escapes may need more: the buffer grows).
    public func answerLineCapacity(id: String, correlationId: String?) -> Int {
        head.count + tail.count + (correlationId?.utf8.count ?? 0) + id.utf8.count + 64
    }

    /// The answer line and its newline, piece by piece, for a caller that writes them straight into its own buffer
    /// (the connection's output): the answer is copied once.
    public func writeAnswerLine(id: String, correlationId: String?, newline: Bool = false,
                                to sink: (UnsafeRawBufferPointer) -> Void) {
        func put(_ text: StaticString) { sink(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)) }
        func put(_ bytes: [UInt8]) { bytes.withUnsafeBytes(sink) }
        put(#"{"jsonrpc":"2.0","id":"#)
        var id = id
        id.withUTF8 { sink(UnsafeRawBufferPointer($0)) }
        put(#","result":"#)
        put(head)
        let hasBefore = head.count > 1, hasAfter = tail.count > 1
        if let correlationId {
            var member: [UInt8] = []
            if hasBefore { member.append(UInt8(ascii: ",")) }
            member += #""correlationId":"#.utf8
            JSONWriter.writeWireString(correlationId, into: &member)
            if hasAfter { member.append(UInt8(ascii: ",")) }
            put(member)
        } else if hasBefore && hasAfter {
            put(",")
        }
        put(tail)
        put(newline ? "}\n" : "}")
    }

    private func write(correlationId: String?, into out: inout [UInt8]) {
        out += head
        let hasBefore = head.count > 1, hasAfter = tail.count > 1
        if let correlationId {
            if hasBefore { out.append(UInt8(ascii: ",")) }
            out += #""correlationId":"#.utf8
            JSONWriter.writeWireString(correlationId, into: &out)
            if hasAfter { out.append(UInt8(ascii: ",")) }
        } else if hasBefore && hasAfter {
            out.append(UInt8(ascii: ","))
        }
        out += tail
    }
}
