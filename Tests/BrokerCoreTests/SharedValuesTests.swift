import BrokerCache
import BrokerJSON
import XCTest

/// Entries read from a document or from the database hold the values they repeat (an account's id, its tenant, the
/// client, the environment, a scope set) once: a loaded cache of 100,000 tokens held them as 500,000 copies.
final class SharedValuesTests: XCTestCase {
    private let hid = "00000000-0000-0000-0000-00000000000a.72f988bf-86f1-41af-91ab-2d7cd011db47"
    private let client = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"

    private func accessToken(secret: String, target: String) -> String {
        """
        {"credential_type": "AccessToken", "secret": "\(secret)", "home_account_id": "\(hid)",
         "environment": "login.microsoftonline.com", "client_id": "\(client)", "target": "\(target)",
         "realm": "72f988bf-86f1-41af-91ab-2d7cd011db47", "token_type": "Bearer", "cached_at": "1700000000",
         "expires_on": "1700003600", "extended_expires_on": "1700007200", "some_sdk_field": {"kept": true}}
        """
    }

    /// Where a string's bytes are: the same place for two strings that share their storage.
    private func storage(_ text: String?) -> UnsafeRawPointer? {
        guard var text else { return nil }
        return text.withUTF8 { UnsafeRawPointer($0.baseAddress) }
    }

    private func field(_ entity: CacheEntity?, _ name: String) -> String? { entity?.fields[name]?.stringValue }

    func testADocumentsEntriesShareTheValuesTheyRepeat() throws {
        let secretA = String(repeating: "a", count: 40), secretB = String(repeating: "b", count: 40)
        let json = """
        {"AccessToken": {"one": \(accessToken(secret: secretA, target: "https://graph.microsoft.com/User.Read")),
                         "two": \(accessToken(secret: secretB, target: "https://graph.microsoft.com/User.Read"))}}
        """
        let document = try CacheDocument.parse(Array(json.utf8))
        let one = document.entries[.accessToken]?["one"], two = document.entries[.accessToken]?["two"]
        for name in ["home_account_id", "environment", "client_id", "realm", "target"] {
            XCTAssertEqual(field(one, name), field(two, name), name)
            XCTAssertNotNil(storage(field(one, name)), name)
            XCTAssertEqual(storage(field(one, name)), storage(field(two, name)), "\(name) is held twice")
        }
        // Secrets are each their own, and everything else reads as it was written.
        XCTAssertEqual(field(one, "secret"), secretA)
        XCTAssertEqual(field(two, "secret"), secretB)
        XCTAssertNotEqual(storage(field(one, "secret")), storage(field(two, "secret")))
        XCTAssertEqual(one?.extendedExpiresOn, 1_700_007_200)
        XCTAssertEqual(one?.fields["some_sdk_field"], .raw(#"{"kept": true}"#))
        XCTAssertEqual(one?.target, ["https://graph.microsoft.com/User.Read"])
    }

    func testRowsReadWithOneSetOfValuesShareThem() throws {
        var shared = SharedValues()
        let first = try CacheDocument.entity(from: Array(accessToken(secret: "x", target: "https://a.example/one").utf8),
                                             sharing: &shared)
        let second = try CacheDocument.entity(from: Array(accessToken(secret: "y", target: "https://a.example/two").utf8),
                                              sharing: &shared)
        XCTAssertEqual(storage(first.homeAccountId), storage(second.homeAccountId))
        XCTAssertEqual(storage(first.clientId), storage(second.clientId))
        // Different values stay different.
        XCTAssertEqual(first.target, ["https://a.example/one"])
        XCTAssertEqual(second.target, ["https://a.example/two"])
        // Without a shared set, each read holds its own copy.
        let alone = try CacheDocument.entity(from: Array(accessToken(secret: "z", target: "t").utf8))
        XCTAssertEqual(alone.homeAccountId, first.homeAccountId)
        XCTAssertNotEqual(storage(alone.homeAccountId), storage(first.homeAccountId))
    }

    func testAnEntryReadBackIsTheEntryThatWasWritten() throws {
        // What the database stores of an entry (its body without the secret) reads back to the same fields, and the
        // secret put back afterwards (as `CacheAssembler.add` does) gives the entry that was written.
        let original = try CacheDocument.entity(from: Array(accessToken(secret: "s3cr3t", target: "a b c").utf8))
        var body = original
        body.fields["secret"] = nil
        var shared = SharedValues()
        var read = try CacheDocument.entity(from: Array(JSONWriter().string(.object(body.fields)).utf8), sharing: &shared)
        read.fields["secret"] = .string("s3cr3t")
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: read.fields.members.map { ($0.key, $0.value) }),
                       Dictionary(uniqueKeysWithValues: original.fields.members.map { ($0.key, $0.value) }))
    }
}
