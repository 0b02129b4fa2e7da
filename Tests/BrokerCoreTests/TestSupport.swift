import BrokerCache
import BrokerCore
import BrokerJSON
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Shared helpers for the BrokerCore tests: fixtures, entity builders, raw-value extraction, temp directories.
enum Fixture {
    static func bytes(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> [UInt8] {
        guard let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures") else {
            XCTFail("fixture \(name).json missing", file: file, line: line)
            throw CocoaError(.fileNoSuchFile)
        }
        return Array(try Data(contentsOf: url))
    }

    static func document(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> CacheDocument {
        try CacheDocument.parse(try bytes(name, file: file, line: line))
    }

    static func cache(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> TokenCache {
        TokenCache(document: try document(name, file: file, line: line))
    }
}

/// Builds an entity whose fields are all JSON strings (the way every SDK writes them).
func makeEntity(_ pairs: KeyValuePairs<String, String>) -> CacheEntity {
    CacheEntity(fields: JSONObject(pairs.map { JSONObject.Member(key: $0.key, value: .string($0.value)) }))
}

func accessToken(hid: String, env: String = "login.microsoftonline.com", client: String, realm: String,
                 target: String, secret: String, cachedAt: String = "1000", expiresOn: String = "4600") -> CacheEntity {
    makeEntity([
        "home_account_id": hid, "environment": env, "credential_type": "AccessToken", "client_id": client,
        "secret": secret, "realm": realm, "target": target, "cached_at": cachedAt, "expires_on": expiresOn,
        "extended_expires_on": expiresOn,
    ])
}

func refreshToken(hid: String, env: String = "login.microsoftonline.com", client: String, secret: String,
                  familyId: String? = nil, lastModified: String? = nil) -> CacheEntity {
    var entity = makeEntity([
        "home_account_id": hid, "environment": env, "credential_type": "RefreshToken", "client_id": client,
        "secret": secret,
    ])
    if let familyId { entity.set("family_id", familyId) }
    if let lastModified { entity.set("last_modification_time", lastModified) }
    return entity
}

func idToken(hid: String, env: String = "login.microsoftonline.com", client: String, realm: String,
             secret: String) -> CacheEntity {
    makeEntity([
        "home_account_id": hid, "environment": env, "credential_type": "IdToken", "client_id": client,
        "secret": secret, "realm": realm,
    ])
}

func accountEntry(hid: String, env: String = "login.microsoftonline.com", realm: String, username: String,
                  localAccountId: String = "oid") -> CacheEntity {
    makeEntity([
        "home_account_id": hid, "environment": env, "realm": realm, "local_account_id": localAccountId,
        "username": username, "authority_type": "MSSTS",
    ])
}

/// The exact text of the value at `path` (object member names) in a JSON document, as written.
func rawValue(in bytes: [UInt8], at path: [String]) throws -> String? {
    var reader = JSONReader(bytes, lenient: true)
    return try rawValue(&reader, path[...])
}

private func rawValue(_ reader: inout JSONReader, _ path: ArraySlice<String>) throws(JSONReadError) -> String? {
    guard let first = path.first else { return try reader.readRaw() }
    guard try reader.peekKind() == .object else { _ = try reader.readRaw(); return nil }
    var found: String?
    try reader.readObject { (key, inner) throws(JSONReadError) in
        if key == first, found == nil {
            found = try rawValue(&inner, path.dropFirst())
        } else {
            _ = try inner.readRaw()
        }
    }
    return found
}

/// The member names of the object at `path`, in document order.
func memberNames(in bytes: [UInt8], at path: [String]) throws -> [String] {
    guard let raw = try rawValue(in: bytes, at: path), case .object(let object) = try JSONReader.parse(raw) else {
        return []
    }
    return object.keys
}

/// A fresh private directory, removed at the end of the test.
func makeTemporaryDirectory(_ testCase: XCTestCase) throws -> String {
    var template = Array("/tmp/brokercore-tests-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard made != nil else { throw CocoaError(.fileWriteUnknown) }
    let path = String(cString: template)
    testCase.addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
    return path
}

func fileMode(_ path: String) -> mode_t? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o777
}

func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let n = Array(needle.utf8)
    guard !n.isEmpty, haystack.count >= n.count else { return false }
    for start in 0...(haystack.count - n.count) where haystack[start] == n[0] {
        if Array(haystack[start..<(start + n.count)]) == n { return true }
    }
    return false
}

extension TokenCache {
    /// The keys `find` returns, sorted (for exact comparisons).
    func keys(_ kind: CredentialKind, _ query: CacheQuery) -> [String] {
        find(kind, query).map(\.key).sorted()
    }

    func secrets(_ kind: CredentialKind, _ query: CacheQuery) -> [String] {
        find(kind, query).compactMap(\.entity.secret).sorted()
    }
}
