import BrokerCache
import BrokerJSON
import XCTest

/// A document read from outside may name a key twice; what brokerd writes must not (other SDKs keep only the last
/// of duplicate keys, so a duplicate would change what they read, and brokerd's next save would differ from this one).
/// Found by the cache-document fuzz target.
final class CacheDocumentDuplicateKeyTests: XCTestCase {
    private func saved(_ text: String) throws -> String {
        let first = try CacheDocument.parse(Array(text.utf8)).serialized(indent: nil)
        let second = try CacheDocument.parse(first).serialized(indent: nil)
        XCTAssertEqual(String(decoding: second, as: UTF8.self), String(decoding: first, as: UTF8.self),
                       "the document changes from one save to the next")
        return String(decoding: first, as: UTF8.self)
    }

    private func occurrences(_ needle: String, in text: String) -> Int {
        text.components(separatedBy: needle).count - 1
    }

    func testAnEntryGivenTwiceIsTheLastOne() throws {
        let entryThenText = try saved(#"{"AccessToken":{"k":{"credential_type":"AccessToken","secret":"fake-at"},"k":"x"}}"#)
        XCTAssertEqual(occurrences(#""k":"#, in: entryThenText), 1, entryThenText)
        XCTAssertTrue(entryThenText.contains(#""k":"x""#), entryThenText)

        let textThenEntry = try saved(#"{"AccessToken":{"k":"x","k":{"credential_type":"AccessToken","secret":"fake-at"}}}"#)
        XCTAssertEqual(occurrences(#""k":"#, in: textThenEntry), 1, textThenEntry)
        XCTAssertTrue(textThenEntry.contains("fake-at"), textThenEntry)
    }

    /// A section long enough to be given room after its first entries (`CacheDocument.makeRoom`), with keys given
    /// again on both sides of that point, a key whose last value is not an object, and the section given twice.
    func testALongSectionKeepsTheLastValueOfEachKey() throws {
        var members = (0..<1_000).map { #""k\#($0 % 800)":{"credential_type":"AccessToken","secret":"fake-at-\#($0)"}"# }
        members.append(#""k5":"opaque""#)
        let text = #"{"AccessToken":{\#(members.joined(separator: ","))},"AccessToken":{"k7":{"secret":"fake-again"}}}"#
        let document = try CacheDocument.parse(Array(text.utf8))
        let section = try XCTUnwrap(document.entries[.accessToken])
        XCTAssertEqual(section.count, 799)
        XCTAssertEqual(section["k0"]?.secret, "fake-at-800")
        XCTAssertEqual(section["k199"]?.secret, "fake-at-999")
        XCTAssertEqual(section["k250"]?.secret, "fake-at-250")
        XCTAssertEqual(section["k799"]?.secret, "fake-at-799")
        XCTAssertEqual(section["k7"]?.secret, "fake-again")
        XCTAssertNil(section["k5"])
        XCTAssertEqual(document.opaqueEntries[.accessToken], ["k5": #""opaque""#])
    }

    /// A field given twice keeps its first place and its last value, as json.loads reads it: a field brokerd reads
    /// (also when one of the two is written with an escape) and one it keeps as text.
    func testAFieldGivenTwiceKeepsItsFirstPlaceAndItsLastValue() throws {
        let entity = try CacheDocument.entity(from: Array(#"""
            {"secret":"one","x_sdk":1,"realm":"r","secr\u0065t":"two","x_sdk":{"b":2},"expires_on":"5","realm":"s"}
            """#.utf8))
        XCTAssertEqual(entity.fields.keys, ["secret", "x_sdk", "realm", "expires_on"])
        XCTAssertEqual(entity.secret, "two")
        XCTAssertEqual(entity.fields["x_sdk"], .raw(#"{"b":2}"#))
        XCTAssertEqual(entity.realm, "s")
        XCTAssertEqual(entity.expiresOn, 5)
    }

    func testAKnownSectionThatIsNotAnObjectIsNotWrittenBesideTheSection() throws {
        let text = try saved(#"{"AccessToken":{"k":{"credential_type":"AccessToken"}},"AccessToken":5}"#)
        // The entry (no secret) is set aside in a section of its own, under its kind's name: not a top-level key.
        let topLevel = text.components(separatedBy: "\"\(CacheDocument.setAsideSectionName)\"")[0]
        XCTAssertEqual(occurrences(#""AccessToken":"#, in: topLevel), 1, text)
    }

    func testAMergeOfAnOpaqueEntryOverAnEntryExportsTheKeyOnce() throws {
        var cache = TokenCache(document: try CacheDocument.parse(Array(
            #"{"AccessToken":{"k":{"credential_type":"AccessToken","secret":"fake-at"}}}"#.utf8)))
        _ = cache.merge(try CacheDocument.parse(Array(#"{"AccessToken":{"k":"opaque"}}"#.utf8)))
        let exported = String(decoding: cache.exported(), as: UTF8.self)
        XCTAssertEqual(occurrences(#""k":"#, in: exported), 1, exported)
    }
}
