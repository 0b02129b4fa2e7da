@testable import BrokerCore
import XCTest

/// The sealed backup format: what opens it, and what does not.
final class CacheBackupTests: XCTestCase {
    /// A cheap cost, so that the tests do not spend 128 MiB per derivation; the format is the same.
    private let cheap = CacheBackup.Cost(log2Rounds: 10, blockSize: 8, parallelism: 1)
    private let document = Array(#"{"RefreshToken": {"k": {"secret": "fake-rt-backup"}}}"#.utf8)

    func testARoundTripGivesTheDocumentBackAndTheFileHoldsNoSecretInTheClear() throws {
        let sealed = try CacheBackup.seal(document, passphrase: "correct horse", cost: cheap)
        XCTAssertNil(sealed.firstRange(of: Array("fake-rt-backup".utf8)), "the secret is not in the file")
        XCTAssertEqual(try CacheBackup.open(sealed, passphrase: "correct horse"), document)
        let again = try CacheBackup.seal(document, passphrase: "correct horse", cost: cheap)
        XCTAssertNotEqual(again, sealed, "a new salt and nonce each time")
    }

    /// The cost is in the header (the standard one is exercised end to end by BackupRestoreTests: one derivation
    /// takes seconds in a debug build).
    func testTheCostIsWrittenInTheHeader() throws {
        XCTAssertEqual(CacheBackup.Cost.standard, CacheBackup.Cost(log2Rounds: 17, blockSize: 8, parallelism: 1))
        let sealed = try CacheBackup.seal(document, passphrase: "correct horse", cost: cheap)
        XCTAssertEqual(Array(sealed[CacheBackup.magic.count ..< CacheBackup.magic.count + 4]), [1, 10, 8, 1])
    }

    func testAWrongPassphraseAChangedByteAndAnEditedCostDoNotOpen() throws {
        let sealed = try CacheBackup.seal(document, passphrase: "correct horse", cost: cheap)
        XCTAssertThrowsError(try CacheBackup.open(sealed, passphrase: "correct horsf")) {
            XCTAssertEqual("\($0)", CacheBackup.Failure.wrongPassphrase.description)
        }
        var flipped = sealed
        flipped[flipped.count - 20] ^= 1
        XCTAssertThrowsError(try CacheBackup.open(flipped, passphrase: "correct horse"))
        var cheaper = sealed
        cheaper[CacheBackup.magic.count + 1] = 9  // N halved: the header is authenticated, so it does not open
        XCTAssertThrowsError(try CacheBackup.open(cheaper, passphrase: "correct horse")) {
            XCTAssertEqual("\($0)", CacheBackup.Failure.wrongPassphrase.description)
        }
    }

    func testWhatIsNotABackupOrCostsTooMuchIsRefusedBeforeAnyDerivation() throws {
        XCTAssertThrowsError(try CacheBackup.open(Array(#"{"AccessToken": {}}"#.utf8), passphrase: "correct horse")) {
            XCTAssertEqual("\($0)", CacheBackup.Failure.notABackup.description)
        }
        var costly = try CacheBackup.seal(document, passphrase: "correct horse", cost: cheap)
        costly[CacheBackup.magic.count + 1] = 40  // 2^40 rounds
        XCTAssertThrowsError(try CacheBackup.open(costly, passphrase: "correct horse")) { error in
            guard case CacheBackup.Failure.tooCostly = error else { return XCTFail("\(error)") }
        }
        var later = costly
        later[CacheBackup.magic.count] = 2
        XCTAssertThrowsError(try CacheBackup.open(later, passphrase: "correct horse")) { error in
            guard case CacheBackup.Failure.unsupportedVersion(2) = error else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try CacheBackup.seal(document, passphrase: "short", cost: cheap)) {
            XCTAssertEqual("\($0)", CacheBackup.Failure.passphraseTooShort.description)
        }
    }
}
