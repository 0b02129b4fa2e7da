import BrokerJSON

/// A unified-cache JSON document as read from, or written for, msal-python, MSAL.NET/Java/Node or the Azure CLI.
///
/// Reading is lenient (BOM, trailing commas, every SDK's field variants); map keys are kept as found because they
/// are opaque. Top-level sections brokerd does not know, and entries of known sections that are not objects, are
/// kept verbatim.
public struct CacheDocument: Sendable, Equatable {
    public var entries: [CredentialKind: [String: CacheEntity]] = [:]
    /// Unknown top-level members, in the order read, each a verbatim JSON text.
    public var otherSections: [(name: String, json: String)] = []
    /// Entries of known sections whose value is not an object (kept, never interpreted).
    public var opaqueEntries: [CredentialKind: [String: String]] = [:]

    public init() {}

    public static func == (lhs: CacheDocument, rhs: CacheDocument) -> Bool {
        lhs.entries == rhs.entries && lhs.opaqueEntries == rhs.opaqueEntries
            && lhs.otherSections.map(\.name) == rhs.otherSections.map(\.name)
            && lhs.otherSections.map(\.json) == rhs.otherSections.map(\.json)
    }

    public var entityCount: Int { entries.values.reduce(0) { $0 + $1.count } }

    // MARK: Reading

    public static func parse(_ bytes: [UInt8]) throws(JSONReadError) -> CacheDocument {
        var document = CacheDocument()
        var reader = JSONReader(bytes, lenient: true)
        if bytes.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) { return document }
        guard try reader.peekKind() == .object else {
            throw JSONReadError(message: "a cache document must be a JSON object", offset: reader.offset)
        }
        try reader.readObject { (name, reader) throws(JSONReadError) in
            guard let kind = CredentialKind(rawValue: name), try reader.peekKind() == .object else {
                document.otherSections.removeAll { $0.name == name }
                document.otherSections.append((name, try readVerbatim(&reader)))
                return
            }
            try reader.readObject { (key, reader) throws(JSONReadError) in
                if try reader.peekKind() == .object {
                    document.entries[kind, default: [:]][key] = try readEntity(&reader)
                } else {
                    document.opaqueEntries[kind, default: [:]][key] = try readVerbatim(&reader)
                }
            }
        }
        try reader.expectEnd()
        return document
    }

    private static func readEntity(_ reader: inout JSONReader) throws(JSONReadError) -> CacheEntity {
        var fields = JSONObject()
        try reader.readObject { (name, reader) throws(JSONReadError) in
            let value: JSONValue = CacheEntity.interpretedFields.contains(name)
                ? try reader.readValue() : .raw(try readVerbatim(&reader))
            fields[name] = value
        }
        return CacheEntity(fields: fields)
    }

    /// A value kept as its text. Byte-for-byte when it is strict JSON; a value only the lenient reader accepts
    /// (trailing commas, as in MSAL.NET's files) is re-written strictly, so that strict readers such as
    /// msal-python's json.loads can read what brokerd writes.
    private static func readVerbatim(_ reader: inout JSONReader) throws(JSONReadError) -> String {
        let raw = try reader.readRaw()
        if (try? JSONReader.parse(raw)) != nil { return raw }
        return JSONWriter().string(try JSONReader.parse(raw, lenient: true))
    }

    // MARK: Writing

    /// The document in the variant every SDK accepts; keys sorted so that equal caches give equal bytes.
    public func serialized(indent: Int? = 4, excludingSections excluded: Set<String> = []) -> [UInt8] {
        var root = JSONObject()
        for kind in CredentialKind.allCases {
            var section = JSONObject()
            var members: [(String, JSONValue)] = []
            for (key, entity) in entries[kind] ?? [:] { members.append((key, .object(entity.normalized(as: kind).fields))) }
            for (key, json) in opaqueEntries[kind] ?? [:] { members.append((key, .raw(json))) }
            for (key, value) in members.sorted(by: { $0.0 < $1.0 }) { section.members.append(.init(key: key, value: value)) }
            root.members.append(.init(key: kind.sectionName, value: .object(section)))
        }
        for (name, json) in otherSections where !excluded.contains(name) {
            root.members.append(.init(key: name, value: .raw(json)))
        }
        return JSONWriter(indent: indent).bytes(.object(root))
    }
}
