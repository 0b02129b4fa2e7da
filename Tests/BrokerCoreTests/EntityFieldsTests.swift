import BrokerCache
import BrokerJSON
import XCTest

/// An entry holds its field names compactly (a number for the names brokerd reads): read and changed field by field,
/// it must stay the JSON object it was, member for member and in order.
final class EntityFieldsTests: XCTestCase {
    func testAnEntryChangedFieldByFieldIsTheObjectChangedTheSameWay() {
        var generator = SystemRandomNumberGenerator()
        let names = ["secret", "home_account_id", "target", "expires_on", "x_sdk_field", "another_unknown", "kid", "",
                     "realm", "é"]
        let values: [JSONValue?] = [nil, .string("a"), .string("b c"), .number("12"), .null, .bool(true), .raw("[1]"),
                                    .array([.string("x")]), .object(JSONObject([.init(key: "k", value: .string("v"))]))]
        for _ in 0..<200 {
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                // Members appended as read, duplicates included: an entry keeps what it is given.
                object.members.append(.init(key: names.randomElement(using: &generator)!,
                                            value: values.compactMap { $0 }.randomElement(using: &generator)!))
            }
            var entity = CacheEntity(fields: object)
            XCTAssertEqual(entity.fields, object)
            for _ in 0..<10 {
                let name = names.randomElement(using: &generator)!, value = values.randomElement(using: &generator)!
                object[name] = value
                entity[field: name] = value
                XCTAssertEqual(entity.fields, object)
                for name in names { XCTAssertEqual(entity[field: name], object[name], name) }
            }
            XCTAssertEqual(entity, CacheEntity(fields: object))
            XCTAssertEqual(entity.fields.keys, object.keys)
        }
    }

    /// An entry's stored form (CacheEntity.storedForm) is its object with the secret set apart, as it was made
    /// before: the first `secret`, if a string, written as "" and handed back; anything else as it lies. Random
    /// entries, duplicate names, escapes and secrets that are not strings included.
    func testTheStoredFormIsTheObjectWithItsStringSecretApart() {
        var generator = SystemRandomNumberGenerator()
        let names = ["secret", "home_account_id", "target", "x_sdk_field", "secret", "kid", "", "é", "quo\"te"]
        let values: [JSONValue] = [.string("a"), .string("line\nbreak \"quoted\" \u{01}"), .number("12"), .null,
                                   .bool(false), .raw("[1,2]"), .array([.string("x")]),
                                   .object(JSONObject([.init(key: "k", value: .string("v"))]))]
        var sawSecret = false, sawOtherSecret = false
        for _ in 0..<300 {
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                object.members.append(.init(key: names.randomElement(using: &generator)!,
                                            value: values.randomElement(using: &generator)!))
            }
            var expected = object, expectedSecret: [UInt8]?
            if case .string(let text)? = expected["secret"] {
                expectedSecret = Array(text.utf8)
                expected["secret"] = .string("")
                sawSecret = true
            } else if expected["secret"] != nil {
                sawOtherSecret = true
            }
            let (json, secret) = CacheEntity(fields: object).storedForm()
            XCTAssertEqual(String(decoding: json, as: UTF8.self),
                           String(decoding: JSONWriter().bytes(.object(expected)), as: UTF8.self))
            XCTAssertEqual(secret, expectedSecret)
        }
        XCTAssertTrue(sawSecret && sawOtherSecret, "both kinds of secret field were tried")
    }

    /// A name brokerd does not read is compared by its text, wherever the entry came from.
    func testEntriesReadAndMadeAreEqualWhateverTheirNames() throws {
        let text = #"{"credential_type":"AccessToken","x_sdk":{"a":1},"secret":"s","é":"1"}"#
        let read = try CacheDocument.entity(from: Array(text.utf8))
        var made = CacheEntity()
        made[field: "credential_type"] = .string("AccessToken")
        made[field: "x_sdk"] = .raw(#"{"a":1}"#)
        made[field: "secret"] = .string("s")
        made[field: "é"] = .raw(#""1""#)
        XCTAssertEqual(read, made)
        made[field: "x_sdk"] = .raw(#"{"a":2}"#)
        XCTAssertNotEqual(read, made)
    }
}
