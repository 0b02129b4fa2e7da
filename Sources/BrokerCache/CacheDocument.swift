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
        var shared = SharedValues()
        if bytes.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) { return document }
        guard try reader.peekKind() == .object else {
            throw JSONReadError(message: "a cache document must be a JSON object", offset: reader.offset)
        }
        try reader.readObject { (name, reader) throws(JSONReadError) in
            if name == setAsideSectionName, try reader.peekKind() == .object {
                try readSetAside(&reader, into: &document, sharing: &shared)
                return
            }
            guard let kind = CredentialKind(rawValue: name), try reader.peekKind() == .object else {
                document.otherSections.removeAll { $0.name == name }
                document.otherSections.append((name, try readVerbatim(&reader)))
                return
            }
            try readSection(kind, &reader, into: &document, sharing: &shared)
        }
        try reader.expectEnd()
        return document
    }

    /// The members of a section: objects as entries, anything else kept verbatim.
    private static func readSection(_ kind: CredentialKind, _ reader: inout JSONReader, into document: inout CacheDocument,
                                    sharing shared: inout SharedValues) throws(JSONReadError) {
        try reader.readObject { (key, reader) throws(JSONReadError) in
            // A key given twice is the last value's (as json.loads reads it), whichever map the first went to.
            if try reader.peekKind() == .object {
                document.entries[kind, default: [:]][key] = try readEntity(&reader, sharing: &shared)
                document.opaqueEntries[kind]?[key] = nil
            } else {
                document.opaqueEntries[kind, default: [:]][key] = try readVerbatim(&reader)
                document.entries[kind]?[key] = nil
            }
        }
    }

    /// A previous export's set-aside entries, back into their sections (where brokerd keeps them); anything else in
    /// that section is kept as an unknown section of its own name.
    private static func readSetAside(_ reader: inout JSONReader, into document: inout CacheDocument,
                                     sharing shared: inout SharedValues) throws(JSONReadError) {
        var unknown: [(String, String)] = []
        try reader.readObject { (name, reader) throws(JSONReadError) in
            guard let kind = CredentialKind(rawValue: name), try reader.peekKind() == .object else {
                unknown.append((name, try readVerbatim(&reader)))
                return
            }
            try readSection(kind, &reader, into: &document, sharing: &shared)
        }
        guard !unknown.isEmpty else { return }
        var text: [UInt8] = [UInt8(ascii: "{")]
        for (index, (name, json)) in unknown.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(name, into: &text)
            text.append(UInt8(ascii: ":"))
            text.append(contentsOf: json.utf8)
        }
        text.append(UInt8(ascii: "}"))
        document.otherSections.append((setAsideSectionName, String(decoding: text, as: UTF8.self)))
    }

    /// One entry from its JSON text (as persisted), read as a document's entry is: the fields brokerd does not
    /// interpret stay verbatim.
    public static func entity(from bytes: [UInt8]) throws(JSONReadError) -> CacheEntity {
        var shared = SharedValues()
        return try entity(from: bytes, sharing: &shared)
    }

    /// `entity(from:)`, holding the values many entries repeat once across every entry read with the same `shared`.
    public static func entity(from bytes: [UInt8], sharing shared: inout SharedValues) throws(JSONReadError) -> CacheEntity {
        var reader = JSONReader(bytes, lenient: true)
        let entity = try readEntity(&reader, sharing: &shared)
        try reader.expectEnd()
        return entity
    }

    private static func readEntity(_ reader: inout JSONReader, sharing shared: inout SharedValues) throws(JSONReadError)
        -> CacheEntity {
        // Read into a buffer used for every entry, then copied once to its size: held for as long as the cache runs,
        // an entry keeps no room to spare (grown one field at a time, an access token's fields had room for 16),
        // except for a secret the database keeps apart and puts back (`CacheAssembler.add`).
        var members = shared.takeScratch()
        var seen: UInt64 = 0
        try reader.readObject(CacheEntity.interpretedFieldTable) { (key, reader) throws(JSONReadError) in
            let name: FieldName, value: JSONValue, earlier: Int?
            switch key {
            case .name(let index):
                // Interpreted: read as a value, named by its number in the table.
                name = .known(UInt8(index))
                if let last = shared.lastValue(field: index), reader.readString(ifEqualTo: last) {
                    value = .string(last)  // the entry before's, compared where it lies: no String made
                } else {
                    value = shared.share(try reader.readValue(), field: index)
                }
                earlier = seen & (1 << index) == 0 ? nil : members.firstIndex { $0.name == name }
                seen |= 1 << index
            case .other(let text):
                name = shared.name(text)
                value = .raw(try readVerbatim(&reader))
                earlier = members.firstIndex { $0.name == name }
            }
            // A field given twice keeps its first place and its last value (as json.loads reads it).
            if let earlier {
                members[earlier].value = value
            } else {
                members.append(EntityField(name: name, value: value))
            }
        }
        var exact: [EntityField] = []
        exact.reserveCapacity(members.count + (seen & CacheEntity.secretFieldBit == 0 ? 1 : 0))
        exact.append(contentsOf: members)
        shared.returnScratch(members)
        return CacheEntity(members: exact)
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

    /// The top-level section where an export keeps the entries no SDK could read in their own section.
    public static let setAsideSectionName = "brokerd_set_aside"

    /// The document in the variant every SDK accepts; keys sorted so that equal caches give equal bytes.
    /// With `settingAside` (an export), entries that would make an SDK fail in their section (`isReadableBySDKs`)
    /// and non-object entries go, verbatim, to `setAsideSectionName` (`{"AccessToken": {key: entry}, …}`), which
    /// the SDKs keep as an unknown section and brokerd reads back into place.
    public func serialized(indent: Int? = 4, excludingSections excluded: Set<String> = [],
                           settingAside: Bool = true) -> [UInt8] {
        var whole: [UInt8] = []
        serialize(indent: indent, excludingSections: excluded, settingAside: settingAside) { whole.append(contentsOf: $0) }
        return whole
    }

    /// The same bytes as `serialized`, handed to `sink` in pieces of about `chunkSize` bytes, so that a document of
    /// hundreds of megabytes can be written to a file without being held twice in memory.
    public func serialize(indent: Int? = 4, excludingSections excluded: Set<String> = [], settingAside: Bool = true,
                          chunkSize: Int = 1 << 20, into sink: ([UInt8]) throws -> Void) rethrows {
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
        var setAside = JSONObject()
        for kind in CredentialKind.allCases {
            member(sectionIndex, kind.sectionName, level: 1)
            sectionIndex += 1
            let objects = entries[kind] ?? [:], opaque = opaqueEntries[kind] ?? [:]
            var asideHere = JSONObject()
            // A key in both maps (a merge can put it there) is written once, as the entry.
            let keys = Set(objects.keys).union(opaque.keys).sorted()
            out.append(UInt8(ascii: "{"))
            var written = 0
            for key in keys {
                let value: JSONValue
                if let entity = objects[key] {
                    let normalized = entity.normalized(as: kind)
                    value = .object(normalized.fields)
                    if settingAside, !normalized.isReadableBySDKs(as: kind) { asideHere[key] = value; continue }
                } else {
                    value = .raw(opaque[key]!)
                    if settingAside { asideHere[key] = value; continue }
                }
                member(written, key, level: 2)
                written += 1
                writer.write(value, into: &out, level: 2)
                if out.count >= chunkSize {
                    try sink(out)
                    out.removeAll(keepingCapacity: true)
                }
            }
            if written > 0 { newline(1) }
            out.append(UInt8(ascii: "}"))
            if !asideHere.isEmpty { setAside[kind.sectionName] = .object(asideHere) }
        }
        // What a previous export set aside under names brokerd does not know comes back beside this export's.
        let carried = settingAside ? otherSections.filter { $0.name == Self.setAsideSectionName } : []
        for (_, json) in carried {
            guard case .object(let earlier)? = try? JSONReader.parse(json) else { continue }
            for item in earlier.members where setAside[item.key] == nil { setAside[item.key] = item.value }
        }
        if !setAside.isEmpty {
            member(sectionIndex, Self.setAsideSectionName, level: 1)
            sectionIndex += 1
            writer.write(.object(setAside), into: &out, level: 1)
        }
        // A known section's name with a value that is not an object was kept as another section; written after the
        // section itself, it would be a duplicate key that other SDKs read instead of the section.
        for (name, json) in otherSections where !excluded.contains(name) && CredentialKind(rawValue: name) == nil
            && !(settingAside && name == Self.setAsideSectionName) {
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
            guard let section = entries[kind] else { continue }
            var left = section.count
            // Each part's section sized once: grown an entry at a time, its keys were hashed again at each doubling.
            var part = [String: CacheEntity](minimumCapacity: min(size - count, left))
            for (key, entity) in section {
                part[key] = entity
                count += 1
                left -= 1
                if count == size {
                    current.entries[kind] = part
                    parts.append(current)
                    current = CacheDocument()
                    count = 0
                    part = [String: CacheEntity](minimumCapacity: min(size, left))
                }
            }
            if !part.isEmpty { current.entries[kind] = part }
        }
        current.otherSections = otherSections
        current.opaqueEntries = opaqueEntries
        parts.append(current)
        return parts
    }
}

/// The values that many entries repeat (an account's id, its tenant, the client, the environment, a scope set), each
/// held once however many entries carry it. Read one by one from a document or the database, every entry held a copy of
/// its own: five allocations of 30 to 80 bytes for each access token, 62 of the 265 MiB a loaded cache of 100,000
/// tokens held besides its secrets. Only for a parse: it holds what it has shared until it is dropped.
public struct SharedValues: Sendable {
    private var strings: Set<String> = []
    /// The names of fields brokerd does not interpret, each boxed once.
    private var otherNames: [String: OtherFieldName] = [:]
    /// The value each shared field had in the entry read last: entries are mostly read in key order, where an
    /// account's entries follow each other, and comparing with it is cheaper than hashing.
    private var lastShared: [String?] = Array(repeating: nil, count: CacheEntity.sharedFieldCount)
    /// The members of the entry being read (`CacheDocument.readEntity`), kept for the next one.
    private var scratch: [EntityField] = []

    public init() {}

    /// The name of a field brokerd does not interpret, held once.
    mutating func name(_ field: String) -> FieldName {
        if let held = otherNames[field] { return .other(held) }
        let held = OtherFieldName(field)
        otherNames[field] = held
        return .other(held)
    }

    /// The value of the interpreted field `field` (its index in `CacheEntity.interpretedFieldTable`), held once when
    /// the field is one whose values repeat: home_account_id, environment, client_id, realm and target.
    mutating func share(_ value: JSONValue, field: Int) -> JSONValue {
        // Strings of up to 15 bytes are held inline and cost no allocation.
        guard field < CacheEntity.sharedFieldCount, case .string(let text) = value, text.utf8.count > 15 else { return value }
        if let last = lastShared[field], last == text { return .string(last) }
        let held = strings.insert(text).memberAfterInsert
        lastShared[field] = held
        return .string(held)
    }

    /// The value the shared field `field` had in the entry read last, if it is one.
    func lastValue(field: Int) -> String? {
        field < lastShared.count ? lastShared[field] : nil
    }

    mutating func takeScratch() -> [EntityField] {
        var members: [EntityField] = []
        swap(&members, &scratch)
        members.removeAll(keepingCapacity: true)
        return members
    }

    mutating func returnScratch(_ members: consuming [EntityField]) {
        scratch = members
    }
}
