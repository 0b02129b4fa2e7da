import BrokerJSON

// Reading a document: its sections and their entries, and the values entries repeat held once (`SharedValues`).

extension CacheDocument {
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
        let start = reader.offset
        var read = 0
        try reader.readObject { (key, reader) throws(JSONReadError) in
            // A key given twice is the last value's (as json.loads reads it), whichever map the first went to.
            if try reader.peekKind() == .object {
                document.entries[kind, default: [:]][key] = try readEntity(&reader, sharing: &shared)
                document.opaqueEntries[kind]?[key] = nil
            } else {
                document.opaqueEntries[kind, default: [:]][key] = try readVerbatim(&reader)
                document.entries[kind]?[key] = nil
            }
            read += 1
            if read == sizingSample { makeRoom(in: &document.entries[kind], after: read, from: start, reader) }
        }
    }

    /// After this many members, a section's map is given room for as many more as the rest of the document would
    /// hold if it were all entries of this size (`makeRoom`).
    private static let sizingSample = 256

    /// Room in a section's map for the entries the rest of the document may hold: grown a doubling at a time, a map of
    /// 100,000 entries hashed every key again at each. Rather too much room than too little: the document is dropped
    /// once it is merged.
    private static func makeRoom(in map: inout [String: CacheEntity]?, after read: Int, from start: Int,
                                 _ reader: JSONReader) {
        guard var entries = map.take() else { return }
        let bytesPerEntry = max(1, (reader.offset - start) / read)
        entries.reserveCapacity(entries.count + reader.remaining / bytesPerEntry)
        map = entries
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
}

/// The values that many entries repeat (an account's id, its tenant, the client, the environment, a scope set), each
/// held once however many entries carry it. Read one by one from a document or the database, every entry held a copy of
/// its own: five allocations of 30 to 80 bytes for each access token, 62 of the 265 MiB a loaded cache of 100,000
/// tokens held besides its secrets. Only for a parse: it holds what it has shared until it is dropped.
public struct SharedValues: Sendable {
    /// Hashed by `ByteDigest`: String's own hash (SipHash over every byte) was a tenth of reading a row.
    private var strings: Set<DigestHashed> = []
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
        let held = strings.insert(DigestHashed(text)).memberAfterInsert.text
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
