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
