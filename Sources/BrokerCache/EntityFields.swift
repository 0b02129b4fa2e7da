import BrokerJSON

/// A field's name as an entry holds it: one of the names brokerd reads, by its number in
/// `CacheEntity.interpretedFieldTable` (nothing held per entry), or any other name, held once (`SharedValues`).
/// Eight bytes where a String is sixteen: a loaded cache of 100,000 tokens holds over a million field names.
enum FieldName: Sendable, Equatable {
    case known(UInt8)
    case other(OtherFieldName)

    init(_ text: String) {
        if let index = CacheEntity.interpretedFieldTable.index(of: text) {
            self = .known(UInt8(index))
        } else {
            self = .other(OtherFieldName(text))
        }
    }

    var text: String {
        switch self {
        case .known(let index): return CacheEntity.interpretedFieldTable.names[Int(index)]
        case .other(let name): return name.text
        }
    }

    static func == (lhs: FieldName, rhs: FieldName) -> Bool {
        switch (lhs, rhs) {
        case (.known(let left), .known(let right)): return left == right
        case (.other(let left), .other(let right)): return left === right || left.text == right.text
        default: return false
        }
    }
}

/// A name brokerd does not interpret, boxed so that `FieldName` stays one word.
final class OtherFieldName: Sendable {
    let text: String
    init(_ text: String) { self.text = text }
}

/// One field of an entry, in the order read.
struct EntityField: Sendable, Equatable {
    var name: FieldName
    var value: JSONValue
}

/// How a lookup names a field: the number of a known name, found once per lookup (or once for good, as the typed
/// accessors' `CacheEntity.Field`), or the other name's text.
struct FieldLookup: Sendable {
    let known: UInt8?
    let text: String

    init(_ text: String) {
        self.text = text
        known = CacheEntity.interpretedFieldTable.index(of: text).map(UInt8.init)
    }

    func matches(_ name: FieldName) -> Bool {
        switch name {
        case .known(let index): return index == known
        case .other(let other): return known == nil && other.text == text
        }
    }
}
