import BrokerJSON

/// The five sections of the MSAL unified cache.
public enum CredentialKind: String, CaseIterable, Sendable, Hashable {
    case accessToken = "AccessToken"
    case refreshToken = "RefreshToken"
    case idToken = "IdToken"
    case account = "Account"
    case appMetadata = "AppMetadata"

    public var sectionName: String { rawValue }

    /// By the case, not by the raw value a raw-valued enum hashes by default: a table keyed by the kind ran SipHash
    /// over its section's name at every lookup (an import makes several a token).
    public func hash(into hasher: inout Hasher) {
        let ordinal: UInt8
        switch self {
        case .accessToken: ordinal = 0
        case .refreshToken: ordinal = 1
        case .idToken: ordinal = 2
        case .account: ordinal = 3
        case .appMetadata: ordinal = 4
        }
        hasher.combine(ordinal)
    }
}

/// One entry of the unified cache, kept the way msal-python keeps it: as the object that was read.
///
/// Fields brokerd interprets are parsed; every other field is held as `.raw` text and written back unchanged.
/// Typed accessors read leniently across SDK variants (numbers, strings or floats for timestamps; `target` as
/// string or array; `kid` or `key_id`; `extended_expires_on` or `ext_expires_on`).
public struct CacheEntity: Sendable, Equatable {
    /// The fields in the order read, names compact (EntityFields.swift).
    private(set) var members: [EntityField]

    public init(fields: JSONObject = JSONObject()) {
        members = fields.members.map { EntityField(name: FieldName($0.key), value: $0.value) }
    }

    /// As read (`CacheDocument.readEntity`): the array is kept as it is given.
    init(members: [EntityField]) {
        self.members = members
    }

    /// The fields as a JSON object (made on each call: for writing an entry out, not for lookups).
    public var fields: JSONObject {
        get { JSONObject(members.map { JSONObject.Member(key: $0.name.text, value: $0.value) }) }
        set { self = CacheEntity(fields: newValue) }
    }

    /// A field's value, as `fields[name]` gives it (the first of a name given twice); set as `fields[name] = `
    /// sets it (in place, appended when new, removed by nil).
    public subscript(field name: String) -> JSONValue? {
        get { self[FieldLookup(name)] }
        set {
            let lookup = FieldLookup(name)
            if let index = members.firstIndex(where: { lookup.matches($0.name) }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(EntityField(name: FieldName(name), value: newValue))
            }
        }
    }

    /// The fields brokerd reads as values; any other is kept as its text. The first `sharedFieldCount` are the ones
    /// whose values entries repeat (`SharedValues`).
    static let interpretedFieldTable = JSONKeyTable([
        "home_account_id", "environment", "client_id", "realm", "target",
        "credential_type", "secret", "cached_at", "expires_on", "extended_expires_on", "ext_expires_on", "refresh_on",
        "token_type", "key_id", "kid", "family_id", "last_modification_time", "local_account_id", "username",
        "authority_type", "name", "given_name", "family_name", "client_info", "account_source",
    ])
    static let sharedFieldCount = 5
    static let secretFieldBit: UInt64 = 1 << secretFieldIndex

    static let timestampFields: [String] = [
        "cached_at", "expires_on", "extended_expires_on", "ext_expires_on", "refresh_on", "last_modification_time",
    ]

    // MARK: Generic access

    /// A field as text: strings as they are, numbers by their literal; null, absent and structures give nil.
    public func string(_ name: String) -> String? { string(FieldLookup(name)) }

    /// The field `lookup` names: the typed accessors below keep theirs (`Field`), where making one matched the name
    /// against the table of interpreted fields again at every read (a load reads a dozen of each of its entries).
    subscript(lookup: FieldLookup) -> JSONValue? {
        members.first { lookup.matches($0.name) }?.value
    }

    func string(_ lookup: FieldLookup) -> String? {
        switch self[lookup] {
        case .string(let s)?: return s
        case .number(let n)?: return n
        default: return nil
        }
    }

    /// The lookups of the fields the typed accessors read.
    private enum Field {
        static let homeAccountId = FieldLookup("home_account_id"), environment = FieldLookup("environment")
        static let clientId = FieldLookup("client_id"), realm = FieldLookup("realm"), target = FieldLookup("target")
        static let credentialType = FieldLookup("credential_type"), secret = FieldLookup("secret")
        static let familyId = FieldLookup("family_id"), keyId = FieldLookup("key_id"), kid = FieldLookup("kid")
        static let tokenType = FieldLookup("token_type"), cachedAt = FieldLookup("cached_at")
        static let expiresOn = FieldLookup("expires_on"), extendedExpiresOn = FieldLookup("extended_expires_on")
        static let extExpiresOn = FieldLookup("ext_expires_on"), refreshOn = FieldLookup("refresh_on")
        static let lastModificationTime = FieldLookup("last_modification_time"), username = FieldLookup("username")
        static let localAccountId = FieldLookup("local_account_id"), authorityType = FieldLookup("authority_type")
        static let name = FieldLookup("name")
    }

    public func timestamp(_ name: String) -> Int64? {
        self[field: name]?.integerValue
    }

    func timestamp(_ lookup: FieldLookup) -> Int64? {
        self[lookup]?.integerValue
    }

    public mutating func set(_ name: String, _ value: String?) {
        self[field: name] = value.map(JSONValue.string)
    }

    public mutating func setTimestamp(_ name: String, _ value: Int64?) {
        self[field: name] = value.map { .string(String($0)) }
    }

    // MARK: Identity

    public var homeAccountId: String? { string(Field.homeAccountId) }
    public var environment: String? { string(Field.environment) }
    public var clientId: String? { string(Field.clientId) }
    public var realm: String? { string(Field.realm) }
    public var credentialType: String? { string(Field.credentialType) }
    public var secret: String? { string(Field.secret) }

    /// `"1"` for the Microsoft family; `""`, null and absent all mean "no family".
    public var familyId: String? {
        guard let value = string(Field.familyId), !value.isEmpty else { return nil }
        return value
    }

    /// Scopes of an access or refresh token, in stored order.
    public var target: [String] {
        switch self[Field.target] {
        case .string(let s)?: return Self.words(s)
        case .array(let items)?: return items.compactMap(\.stringValue)
        default: return []
        }
    }

    /// The words of a target text, split at spaces and tabs by bytes: a Character split is a grapheme walk, and the
    /// generic split of a UTF-8 view cost fifty instructions a byte (a token's target is read for each account summary).
    static func words(_ text: String) -> [String] {
        var text = text
        return text.withUTF8 { bytes in
            var words: [String] = [], start = 0
            for index in 0...bytes.count where index == bytes.count || bytes[index] == 0x20 || bytes[index] == 0x09 {
                if index > start {
                    words.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
                }
                start = index + 1
            }
            return words
        }
    }

    public var keyId: String? { string(Field.keyId) ?? string(Field.kid) }
    public var tokenType: String { string(Field.tokenType) ?? "Bearer" }

    // MARK: Lifetimes

    public var cachedAt: Int64? { timestamp(Field.cachedAt) }
    public var expiresOn: Int64? { timestamp(Field.expiresOn) }
    public var extendedExpiresOn: Int64? { timestamp(Field.extendedExpiresOn) ?? timestamp(Field.extExpiresOn) }
    public var refreshOn: Int64? { timestamp(Field.refreshOn) }
    public var lastModificationTime: Int64? { timestamp(Field.lastModificationTime) }

    // MARK: Account fields

    public var username: String? { string(Field.username) }
    public var localAccountId: String? { string(Field.localAccountId) }
    public var authorityType: String? { string(Field.authorityType) }
    public var displayName: String? { string(Field.name) }

    /// A credential (as opposed to a placeholder entry such as `{"foo": "bar"}` that other SDKs' tests keep around).
    package var isCredential: Bool { self[Field.secret] != nil || self[Field.credentialType] != nil }

    /// The entry as brokerd writes it: every SDK's reader accepts it (integer-string timestamps, `expires_on`
    /// and `extended_expires_on` always present on access tokens, `target` as a space-separated string);
    /// fields brokerd does not interpret are untouched.
    package func normalized(as kind: CredentialKind) -> CacheEntity {
        var copy = self
        for name in Self.timestampFields {
            guard let value = copy[field: name] else { continue }
            switch value {
            case .raw: continue
            case .null: copy[field: name] = nil
            default:
                if let seconds = value.integerValue { copy[field: name] = .string(String(seconds)) }
            }
        }
        if case .array = copy[field: "target"] {
            copy[field: "target"] = .string(target.joined(separator: " "))
        }
        if kind == .accessToken, isCredential {
            if copy[field: "expires_on"] == nil { copy[field: "expires_on"] = .string("0") }
            if copy[field: "extended_expires_on"] == nil {
                copy[field: "extended_expires_on"] = .string(String(extendedExpiresOn ?? expiresOn ?? 0))
            }
        }
        return copy
    }
}

extension CacheEntity {
    /// Whether this entry, as `normalized(as:)` writes it, can stand in its section without making an SDK that
    /// reads the file fail. msal-python (and with it the Azure CLI) runs `int(entry["expires_on"])` on every access
    /// token it scans, `int()` on `last_modification_time`, `str.split` on `target`, reads `secret` of the
    /// credentials it matches, and `authority_type` and `username` of every account; the other SDKs ask less.
    package func isReadableBySDKs(as kind: CredentialKind) -> Bool {
        for name in Self.timestampFields {
            if let value = self[field: name], value.integerValue == nil { return false }
        }
        if let target = self[field: "target"], target.stringValue == nil { return false }
        switch kind {
        case .accessToken:
            return self[field: "expires_on"] != nil && self[field: "secret"]?.stringValue != nil
        case .refreshToken, .idToken:
            return self[field: "secret"]?.stringValue != nil
        case .account:
            return self[field: "authority_type"]?.stringValue != nil && self[field: "username"]?.stringValue != nil
        case .appMetadata:
            return true
        }
    }

    /// The key msal-python would file this entry under. Other SDKs' keys differ; keys are opaque on read
    /// and only used when brokerd itself adds an entry.
    public func canonicalKey(as kind: CredentialKind) -> String {
        let hid = homeAccountId ?? "", env = environment ?? "", client = clientId ?? "", realm = self.realm ?? ""
        let scopes = target.joined(separator: " ")
        switch kind {
        case .accessToken:
            return [hid, env, "accesstoken", client, realm, scopes].joined(separator: "-").lowercased()
        case .refreshToken:
            return [hid, env, "refreshtoken", client, "", scopes].joined(separator: "-").lowercased()
        case .idToken:
            return [hid, env, "idtoken", client, realm, ""].joined(separator: "-").lowercased()
        case .account:
            return [hid, env, realm].joined(separator: "-").lowercased()
        case .appMetadata:
            return "appmetadata-\(env)-\(client)"
        }
    }

    // MARK: Stored form

    /// The entry as a row of the database holds it: its JSON with a string `secret` written as "" (the field keeps
    /// its place when the row is read back) and that secret apart, for the store to seal. Any other value there is
    /// not a credential's secret and stays in the JSON. Written from the fields as they lie, with no object made
    /// between: that copy was an eighth of encoding an import's rows.
    public func storedForm() -> (json: [UInt8], secret: [UInt8]?) {
        let writer = JSONWriter()
        var json: [UInt8] = [UInt8(ascii: "{")]
        var secret: [UInt8]?, secretSeen = false
        for (offset, field) in members.enumerated() {
            if offset > 0 { json.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(field.name.text, into: &json)
            json.append(UInt8(ascii: ":"))
            if !secretSeen, case .known(Self.secretFieldIndex) = field.name {
                // Only the first field of the name is the entry's secret, as `self[field:]` reads it.
                secretSeen = true
                if case .string(let text) = field.value {
                    secret = Array(text.utf8)
                    json.append(contentsOf: #""""#.utf8)
                    continue
                }
            }
            writer.write(field.value, into: &json, level: 0)
        }
        json.append(UInt8(ascii: "}"))
        return (json, secret)
    }

    static let secretFieldIndex = UInt8(interpretedFieldTable.index(of: "secret")!)
}
