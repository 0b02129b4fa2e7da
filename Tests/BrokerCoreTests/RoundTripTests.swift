import BrokerCache
import BrokerCore
import BrokerJSON
import XCTest

/// Lossless round trip (reference §1.1, §8): what brokerd does not interpret comes back byte-for-byte, and what it
/// writes is the variant every SDK accepts.
final class RoundTripTests: XCTestCase {
    private let atKey = "uid.utid-login.example.com-accesstoken-rt_client-contoso-s1 s2"
    private let bareATKey = "uid.utid-login.example.com-accesstoken-rt_client-contoso-s3"

    /// Where an export puts the entries no SDK could read in their section (the placeholder, the non-object).
    private let aside = CacheDocument.setAsideSectionName

    /// Paths of values brokerd must not touch; `exported`: as an export writes them (unreadable entries set aside).
    private func verbatimPaths(exported: Bool) -> [[String]] {
        let unreadable = exported ? [aside, "AccessToken"] : ["AccessToken"]
        return [
            ["customized"], ["unknownEntity"], ["FutureSection"],
            unreadable + ["opaque-entry"],
            unreadable + ["an-entry", "foo"],
            ["AccessToken", atKey, "ext"],
            ["AccessToken", atKey, "requested_claims"],
            ["AccessToken", atKey, "future_number"],
            ["AccessToken", atKey, "future_string"],
            ["AccessToken", atKey, "future_null"],
        ]
    }

    private func assertVerbatim(_ output: [UInt8], input: [UInt8], _ label: String, exported: Bool = true,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertNoThrow(try JSONReader.parse(output), "\(label): output is strict JSON", file: file, line: line)
        for (inInput, inOutput) in zip(verbatimPaths(exported: false), verbatimPaths(exported: exported)) {
            let expected = try XCTUnwrap(try rawValue(in: input, at: inInput), "fixture lacks \(inInput)", file: file, line: line)
            XCTAssertEqual(try rawValue(in: output, at: inOutput), expected, "\(label): \(inOutput)", file: file, line: line)
        }
        let placeholder = (exported ? [aside] : []) + ["AccessToken", "an-entry"]
        XCTAssertEqual(try memberNames(in: output, at: placeholder), ["foo"],
                       "\(label): placeholder entry gains no fields", file: file, line: line)
    }

    func testFixtureHoldsTheOddValues() throws {
        let input = try Fixture.bytes("roundtrip")
        XCTAssertEqual(try rawValue(in: input, at: ["AccessToken", atKey, "future_number"]), "1.50e3")
        XCTAssertEqual(try rawValue(in: input, at: ["AccessToken", atKey, "future_string"]), #""caf\u00e9\/\ud83d\ude00""#)
        XCTAssertEqual(try rawValue(in: input, at: ["AccessToken", "an-entry"]), #"{"foo": "bar"}"#)
    }

    func testUnknownDataSurvivesSerialized() throws {
        let input = try Fixture.bytes("roundtrip")
        let document = try CacheDocument.parse(input)
        XCTAssertEqual(document.otherSections.map(\.name), ["customized", "unknownEntity", "FutureSection"])
        XCTAssertEqual(document.opaqueEntries[.accessToken]?["opaque-entry"], #""not an object, kept as is""#)
        try assertVerbatim(document.serialized(), input: input, "serialized()")
        try assertVerbatim(document.serialized(indent: nil), input: input, "serialized(indent: nil)")
        try assertVerbatim(document.serialized(settingAside: false), input: input, "in place", exported: false)
    }

    func testUnknownDataSurvivesExportAndPersist() throws {
        let input = try Fixture.bytes("roundtrip")
        var cache = TokenCache(document: try CacheDocument.parse(input))
        try assertVerbatim(cache.exported(), input: input, "exported()")
        try assertVerbatim(cache.persisted(), input: input, "persisted()", exported: false)

        // Changing other entries leaves the unknown data alone.
        cache.add(.accessToken, accessToken(hid: "x.y", client: "c", realm: "r", target: "s", secret: "fake-at-9"))
        cache.remove(.accessToken, key: bareATKey)
        let exported = cache.exported()
        try assertVerbatim(exported, input: input, "exported() after changes")
        // ... and a second generation reads back the same.
        let again = TokenCache(document: try CacheDocument.parse(exported)).exported()
        XCTAssertEqual(again, exported)
    }

    func testSectionsAndKeysAreWrittenInAStableOrder() throws {
        let output = try Fixture.document("roundtrip").serialized(settingAside: false)
        XCTAssertEqual(try memberNames(in: output, at: []),
                       ["AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata",
                        "customized", "unknownEntity", "FutureSection"])
        XCTAssertEqual(try memberNames(in: output, at: ["AccessToken"]),
                       ["an-entry", "opaque-entry", atKey, bareATKey])
        XCTAssertEqual(output.first, UInt8(ascii: "{"))

        let export = try Fixture.document("roundtrip").serialized()
        XCTAssertEqual(try memberNames(in: export, at: []),
                       ["AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata", aside,
                        "customized", "unknownEntity", "FutureSection"])
        XCTAssertEqual(try memberNames(in: export, at: ["AccessToken"]), [atKey, bareATKey])
        XCTAssertEqual(try memberNames(in: export, at: [aside, "AccessToken"]), ["an-entry", "opaque-entry"])
    }

    // MARK: The variant brokerd writes

    func testWrittenTimestampsAreIntegerStringsAndLifetimesAlwaysPresent() throws {
        let output = try Fixture.document("roundtrip").serialized()
        let root = try XCTUnwrap(try JSONReader.parse(output).objectValue)
        let section = try XCTUnwrap(root["AccessToken"]?.objectValue)
        let at = try XCTUnwrap(section[atKey]?.objectValue)
        XCTAssertEqual(at["cached_at"], .string("1000"))
        XCTAssertEqual(at["expires_on"], .string("4600"))
        XCTAssertEqual(at["extended_expires_on"], .string("4600"), "defaults to expires_on")
        XCTAssertEqual(at["target"], .string("s1 s2"))
        XCTAssertEqual(at["secret"], .string("fake-at-rt-1"))

        let bare = try XCTUnwrap(section[bareATKey]?.objectValue)
        XCTAssertEqual(bare["expires_on"], .string("0"))
        XCTAssertEqual(bare["extended_expires_on"], .string("0"))
        XCTAssertEqual(bare["target"], .string("s3"))
    }

    func testDotNetDocumentIsWrittenWithoutBOMAndWithExtendedExpiresOn() throws {
        let output = try Fixture.document("dotnet").serialized()
        XCTAssertEqual(output.first, UInt8(ascii: "{"))
        let root = try XCTUnwrap(try JSONReader.parse(output).objectValue)
        let at = try XCTUnwrap(root["AccessToken"]?.objectValue?.members.first?.value.objectValue)
        XCTAssertEqual(at["extended_expires_on"], .string("1700090000"))
        XCTAssertEqual(at["ext_expires_on"], .string("1700090000"), "kept for old .NET readers")
        XCTAssertEqual(at["expires_on"], .string("1700003600"))
        XCTAssertEqual(at["kid"], .string("fake-kid-dn"))
        XCTAssertEqual(at["client_info"], .string("eyJ1aWQiOiJkbi11aWQiLCJ1dGlkIjoiZG4tdXRpZCJ9"))
        XCTAssertEqual(at["user_assertion_hash"], .null)
        let rts = try XCTUnwrap(root["RefreshToken"]?.objectValue)
        XCTAssertEqual(rts.keys, ["dn-uid.dn-utid-login.windows.net-refreshtoken-1--",
                                  "dn-uid.dn-utid-login.windows.net-refreshtoken-dn-other-client--"],
                       "keys are kept as found")
        XCTAssertEqual(rts.members[1].value.objectValue?["family_id"], .null)
    }

    func testEarlyPythonListTargetAndFloatsAreNormalized() throws {
        let output = try Fixture.document("python-early").serialized()
        let root = try XCTUnwrap(try JSONReader.parse(output).objectValue)
        let at = try XCTUnwrap(root["AccessToken"]?.objectValue?["early-at-key"]?.objectValue)
        XCTAssertEqual(at["target"], .string("profile openid User.Read"))
        XCTAssertEqual(at["cached_at"], .string("1548804634"))
        XCTAssertEqual(at["expires_on"], .string("1548808234"))
        XCTAssertEqual(at["extended_expires_on"], .string("1548808234"))
        let rt = try XCTUnwrap(root["RefreshToken"]?.objectValue?["early-rt-key"]?.objectValue)
        XCTAssertEqual(rt["target"], .string("profile openid User.Read"))
        XCTAssertNil(rt["expires_on"], "refresh tokens get no expires_on")
        let account = try XCTUnwrap(root["Account"]?.objectValue?["early-account-key"]?.objectValue)
        XCTAssertEqual(account["authority_type"], .string("AAD"))
    }

    func testFractionalModificationTimeIsWrittenAsInteger() throws {
        let input = try Fixture.bytes("objc-mac")
        let output = try CacheDocument.parse(input).serialized()
        let key = "mac-uid.mac-utid-login.microsoftonline.com-refreshtoken-mac-client--"
        XCTAssertEqual(try rawValue(in: output, at: ["RefreshToken", key, "last_modification_time"]), #""1562842351""#)
        XCTAssertEqual(try rawValue(in: output, at: ["RefreshToken", key, "last_modification_app"]),
                       #""com.example.macapp""#)
    }

    func testPythonStyleDocumentIsAFixedPoint() throws {
        let document = try Fixture.document("python")
        let once = document.serialized()
        let reread = try CacheDocument.parse(once)
        XCTAssertEqual(reread, document)
        XCTAssertEqual(reread.serialized(), once)
        XCTAssertEqual(try rawValue(in: once, at: ["AppMetadata", "appmetadata-login.example.com-Py_Client_ID", "family_id"]),
                       #""1""#)
    }

    // MARK: Lenient input, strict output

    /// MSAL.NET's own fixtures carry trailing commas; once read leniently, brokerd must not hand them on to
    /// strict readers (msal-python's json.loads) inside the verbatim values.
    func testExportOfLenientInputIsStrictJSON() throws {
        let input = Array("""
        {"AccessToken": {"k": {"credential_type": "AccessToken", "secret": "fake-at-1", "ext": {"x": [1, 2,],},},},
         "customized": {"a": [1, 2,], "b": 1,},}
        """.utf8)
        let cache = TokenCache(document: try CacheDocument.parse(input))
        let exported = cache.exported()
        XCTAssertNoThrow(try JSONReader.parse(exported), String(decoding: exported, as: UTF8.self))
        XCTAssertNoThrow(try JSONReader.parse(cache.persisted()))
    }

    /// persisted() writes compact JSON; a verbatim section that spans lines must still be written (as its value),
    /// never dropped, or the next start finds an unreadable cache and moves it aside.
    func testPersistedKeepsMultiLineLenientSections() throws {
        let input = Array("""
        {
          "customized": {
            "a": [1, 2,],
            "b": "kept",
          },
          "AccessToken": {}
        }
        """.utf8)
        let cache = TokenCache(document: try CacheDocument.parse(input))
        let persisted = cache.persisted()
        XCTAssertFalse(persisted.contains(0x0A))
        let reread = try XCTUnwrap(try? CacheDocument.parse(persisted), String(decoding: persisted, as: UTF8.self))
        let section = try XCTUnwrap(reread.otherSections.first { $0.name == "customized" }?.json)
        XCTAssertEqual(try JSONReader.parse(section, lenient: true),
                       .object(JSONObject(["a": .array([.number("1"), .number("2")]), "b": .string("kept")])))
    }

    func testMultiLineStrictSectionIsKeptInPersistedOutput() throws {
        let input = Array("{\n \"customized\": {\n  \"b\": 1.50e3\n }\n}".utf8)
        let persisted = TokenCache(document: try CacheDocument.parse(input)).persisted()
        XCTAssertFalse(persisted.contains(0x0A))
        XCTAssertEqual(try rawValue(in: persisted, at: ["customized"]), #"{"b":1.50e3}"#)
        // The indented export keeps it byte-for-byte.
        let exported = TokenCache(document: try CacheDocument.parse(input)).exported()
        XCTAssertEqual(try rawValue(in: exported, at: ["customized"]), "{\n  \"b\": 1.50e3\n }")
    }
}
