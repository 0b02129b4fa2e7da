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
                // A key given twice is the last value's (as json.loads reads it), whichever map the first went to.
                if try reader.peekKind() == .object {
                    document.entries[kind, default: [:]][key] = try readEntity(&reader)
                    document.opaqueEntries[kind]?[key] = nil
                } else {
                    document.opaqueEntries[kind, default: [:]][key] = try readVerbatim(&reader)
                    document.entries[kind]?[key] = nil
                }
            }
        }
        try reader.expectEnd()
        return document
    }

    /// One entry from its JSON text (as persisted), read as a document's entry is: the fields brokerd does not
    /// interpret stay verbatim.
    public static func entity(from bytes: [UInt8]) throws(JSONReadError) -> CacheEntity {
        var reader = JSONReader(bytes, lenient: true)
        let entity = try readEntity(&reader)
        try reader.expectEnd()
        return entity
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
        var whole: [UInt8] = []
        serialize(indent: indent, excludingSections: excluded) { whole.append(contentsOf: $0) }
        return whole
    }

    /// The same bytes as `serialized`, handed to `sink` in pieces of about `chunkSize` bytes, so that a document of
    /// hundreds of megabytes can be written to a file without being held twice in memory.
    public func serialize(indent: Int? = 4, excludingSections excluded: Set<String> = [], chunkSize: Int = 1 << 20,
                          into sink: ([UInt8]) throws -> Void) rethrows {
        let writer = JSONWriter(indent: indent)
        var out: [UInt8] = []
        out.reserveCapacity(chunkSize + 4096)
        func newline(_ level: Int) {
            guard let indent else { return }
            out.append(0x0A)
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent * level))
        }
        func member(_ index: Int, _ key: String, level: Int) {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            newline(level)
            JSONWriter.writeString(key, into: &out)
            out.append(UInt8(ascii: ":"))
            if indent != nil { out.append(UInt8(ascii: " ")) }
        }
        out.append(UInt8(ascii: "{"))
        var sectionIndex = 0
        for kind in CredentialKind.allCases {
            member(sectionIndex, kind.sectionName, level: 1)
            sectionIndex += 1
            let objects = entries[kind] ?? [:], opaque = opaqueEntries[kind] ?? [:]
            // A key in both maps (a merge can put it there) is written once, as the entry.
            let keys = Set(objects.keys).union(opaque.keys).sorted()
            out.append(UInt8(ascii: "{"))
            for (index, key) in keys.enumerated() {
                member(index, key, level: 2)
                if let entity = objects[key] {
                    writer.write(.object(entity.normalized(as: kind).fields), into: &out, level: 2)
                } else {
                    writer.write(.raw(opaque[key]!), into: &out, level: 2)
                }
                if out.count >= chunkSize {
                    try sink(out)
                    out.removeAll(keepingCapacity: true)
                }
            }
            if !keys.isEmpty { newline(1) }
            out.append(UInt8(ascii: "}"))
        }
        // A known section's name with a value that is not an object was kept as another section; written after the
        // section itself, it would be a duplicate key that other SDKs read instead of the section.
        for (name, json) in otherSections where !excluded.contains(name) && CredentialKind(rawValue: name) == nil {
            member(sectionIndex, name, level: 1)
            sectionIndex += 1
            writer.write(.raw(json), into: &out, level: 1)
        }
        newline(0)
        out.append(UInt8(ascii: "}"))
        try sink(out)
    }

    // MARK: Importing in parts

    /// The document split into parts of about `size` entries each, in section order; sections brokerd does not know
    /// and opaque entries come with the last part. Merging the parts in order is merging the document; between
    /// parts, others get to the cache.
    public func parts(of size: Int) -> [CacheDocument] {
        var parts: [CacheDocument] = []
        var current = CacheDocument(), count = 0
        for kind in CredentialKind.allCases {
            for (key, entity) in entries[kind] ?? [:] {
                current.entries[kind, default: [:]][key] = entity
                count += 1
                if count == size {
                    parts.append(current)
                    current = CacheDocument()
                    count = 0
                }
            }
        }
        current.otherSections = otherSections
        current.opaqueEntries = opaqueEntries
        parts.append(current)
        return parts
    }
}
