import BrokerJSON

/// A token an app asked for: which the background refresh keeps fresh.
public struct TokenUse: Sendable, Equatable {
    public var clientId: String
    public var homeAccountId: String
    public var authority: String
    public var scopes: [String]
    public var lastUsed: Int64

    /// The fields lowercased, the scopes sorted, joined by spaces. Every cache hit looks its use up by this key, so
    /// it is written into one buffer, each part copied and then ASCII lowered in place (the usual case; other text
    /// goes through `lowercased()`): joining lowered strings cost a hit more than its token lookup.
    package var key: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(clientId.utf8.count + homeAccountId.utf8.count + authority.utf8.count
                              + scopes.reduce(0) { $0 + $1.utf8.count + 1 } + 2)
        Self.appendLowered(clientId, to: &bytes)
        bytes.append(0x20)
        Self.appendLowered(homeAccountId, to: &bytes)
        bytes.append(0x20)
        Self.appendLowered(authority, to: &bytes)
        if scopes.count == 1 {
            bytes.append(0x20)
            Self.appendLowered(scopes[0], to: &bytes)
        } else if scopes.count > 1 {
            for scope in scopes.map(\.lowercasedIfNeeded).sorted() {
                bytes.append(0x20)
                bytes.append(contentsOf: scope.utf8)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func appendLowered(_ text: String, to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(contentsOf: text.utf8)
        let ascii = bytes.withUnsafeMutableBufferPointer { buffer -> Bool in
            var high: UInt8 = 0
            for index in start..<buffer.count {
                let byte = buffer[index]
                high |= byte
                if byte &- 0x41 < 26 { buffer[index] = byte | 0x20 }
            }
            return high < 0x80
        }
        if !ascii {
            bytes.removeSubrange(start...)
            bytes.append(contentsOf: text.lowercased().utf8)
        }
    }

    package init(clientId: String, homeAccountId: String, authority: String, scopes: [String], lastUsed: Int64) {
        self.clientId = clientId
        self.homeAccountId = homeAccountId
        self.authority = authority
        self.scopes = scopes
        self.lastUsed = lastUsed
    }

    package init?(json: JSONValue) {
        guard let object = json.objectValue, let clientId = object["clientId"]?.stringValue,
              let hid = object["homeAccountId"]?.stringValue, let authority = object["authority"]?.stringValue else { return nil }
        self.init(clientId: clientId, homeAccountId: hid, authority: authority,
                  scopes: (object["scopes"]?.arrayValue ?? []).compactMap(\.stringValue),
                  lastUsed: object["lastUsed"]?.integerValue ?? 0)
    }

    package var json: JSONValue {
        .object(JSONObject([
            "clientId": .string(clientId), "homeAccountId": .string(homeAccountId), "authority": .string(authority),
            "scopes": .array(scopes.map(JSONValue.string)), "lastUsed": .string(String(lastUsed)),
        ]))
    }
}
