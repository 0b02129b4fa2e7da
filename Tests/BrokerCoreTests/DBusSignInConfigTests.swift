import BrokerConfig
import XCTest

final class DBusSignInConfigTests: XCTestCase {
    func testDBusSignInIsAutoUnlessSetAndRefusesOtherValues() throws {
        XCTAssertEqual(BrokerConfiguration().dbusSignIn, "auto")
        for value in ["auto", "browser", "device-code"] {
            XCTAssertEqual(try BrokerConfiguration.parse("dbus_sign_in = \"\(value)\"").dbusSignIn, value)
        }
        XCTAssertThrowsError(try BrokerConfiguration.parse("dbus_sign_in = \"deviceCode\"")) { error in
            XCTAssertEqual("\(error)", #"line 1: 'dbus_sign_in' must be "auto", "browser" or "device-code""#)
        }
        XCTAssertThrowsError(try BrokerConfiguration.parse("dbus_sign_in = true"))
    }
}
