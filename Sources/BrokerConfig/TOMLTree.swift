/// The tables of a document while it is read, and the specification's rules about them: a table is defined once;
/// a header may pass through any table but not define one made by dotted keys; dotted keys may not add to a table
/// that a header defined, nor to an array of tables; inline tables and arrays are complete when written.
final class TableNode {
    enum Origin { case root, header, implicit, dotted, inline }

    enum Slot {
        /// Scalars, arrays and inline tables: never extended, so kept as finished values.
        case value(TOMLValue, line: Int)
        case table(TableNode)
        case tableArray(TableArrayNode)
    }

    var origin: Origin
    var line: Int
    /// Containers from the root down to this table (the root is 0; an element of `[[a]]` is 2).
    let depth: Int
    private(set) var keys: [String] = []
    private(set) var slots: [String: Slot] = [:]

    init(origin: Origin, line: Int, depth: Int) {
        self.origin = origin
        self.line = line
        self.depth = depth
    }

    func insert(_ key: String, _ slot: Slot) {
        keys.append(key)
        slots[key] = slot
    }

    /// Tables made by dotted keys inside an inline table belong to it (`inline`).
    func frozen(inline: Bool = false) -> TOMLTable {
        var entries: [TOMLTable.Entry] = []
        entries.reserveCapacity(keys.count)
        for key in keys {
            switch slots[key]! {
            case .value(let value, let line):
                entries.append(TOMLTable.Entry(key: key, value: value, line: line))
            case .table(let table):
                entries.append(TOMLTable.Entry(key: key, value: .table(table.frozen(inline: inline)), line: table.line))
            case .tableArray(let array):
                let elements = array.elements.map { TOMLValue.table($0.frozen()) }
                entries.append(TOMLTable.Entry(key: key, value: .array(elements), line: array.line))
            }
        }
        return TOMLTable(origin: inline ? .inline : publicOrigin, line: line, entries: entries)
    }

    private var publicOrigin: TOMLTable.Origin {
        switch origin {
        case .root: .root
        case .header: .header
        case .implicit: .implicit
        case .dotted: .dottedKeys
        case .inline: .inline
        }
    }
}

/// A class so that appending the thousandth `[[a]]` element does not copy the other 999.
final class TableArrayNode {
    var elements: [TableNode]
    /// The first `[[…]]` header.
    let line: Int

    init(first: TableNode, line: Int) {
        elements = [first]
        self.line = line
    }
}

extension TOMLParser {
    /// The table a dotted key's last part goes in, creating the tables named by the other parts.
    mutating func dottedKeyParent(_ key: Key, in base: TableNode, path: [String]) throws(TOMLError) -> TableNode {
        var table = base
        for index in 0..<(key.parts.count - 1) {
            let name = key.parts[index]
            var shown: String { TOML.dottedKey(path + key.parts[...index]) }
            switch table.slots[name] {
            case nil:
                try checkDepth(table.depth + 1, at: key.marks[index])
                let child = TableNode(origin: .dotted, line: key.marks[index].line, depth: table.depth + 1)
                table.insert(name, .table(child))
                table = child
            case .table(let child)?:
                // An implicit table (`a` of `[a.b]`) is undefined, so dotted keys may define it; from then on it
                // counts as made by them, and a later `[a]` is refused.
                guard child.origin == .dotted || child.origin == .implicit else {
                    throw error("table [\(shown)] was defined by its header on line \(child.line); dotted keys "
                                + "cannot add to it from another table", at: key.marks[index])
                }
                child.origin = .dotted
                table = child
            case .tableArray(let array)?:
                throw error("'\(shown)' is an array of tables ([[\(shown)]] on line \(array.line)); dotted keys "
                            + "cannot add to it", at: key.marks[index])
            case .value(let value, let line)?:
                throw error(notATable(value, shown, line: line), at: key.marks[index])
            }
        }
        return table
    }

    /// Refuses a key/value whose key is already there, before its value is read.
    func checkUnset(_ key: Key, in table: TableNode, path: [String]) throws(TOMLError) {
        guard let existing = table.slots[key.parts[key.parts.count - 1]] else { return }
        let shown = TOML.dottedKey(path + key.parts)
        switch existing {
        case .value:
            throw error("'\(shown)' is set twice", at: key.marks[0])
        case .table(let table):
            throw error("'\(shown)' is set twice: it is already a table (line \(table.line))", at: key.marks[0])
        case .tableArray(let array):
            throw error("'\(shown)' is set twice: it is already an array of tables (line \(array.line))", at: key.marks[0])
        }
    }

    /// `[a.b]`: defines the table, which must not exist yet except as an implicit parent of an earlier header.
    mutating func defineTable(_ key: Key, header: Mark) throws(TOMLError) -> TableNode {
        let parent = try headerParent(key, header: header)
        let name = key.parts[key.parts.count - 1]
        let shown = TOML.dottedKey(key.parts)
        switch parent.slots[name] {
        case nil:
            try checkDepth(parent.depth + 1, at: key.marks[key.marks.count - 1])
            let table = TableNode(origin: .header, line: header.line, depth: parent.depth + 1)
            parent.insert(name, .table(table))
            return table
        case .table(let table)?:
            switch table.origin {
            case .implicit:
                table.origin = .header
                table.line = header.line
                return table
            case .dotted:
                throw error("table [\(shown)] was already defined with dotted keys on line \(table.line)", at: header)
            default:
                throw error("table [\(shown)] appears twice", at: header)
            }
        case .tableArray(let array)?:
            throw error("[\(shown)] conflicts with the array of tables [[\(shown)]] on line \(array.line)", at: header)
        case .value(let value, let line)?:
            throw error(notATable(value, shown, line: line), at: header)
        }
    }

    /// `[[a.b]]`: a new table at the end of the array of tables, which is created if need be.
    mutating func appendTableArrayElement(_ key: Key, header: Mark) throws(TOMLError) -> TableNode {
        let parent = try headerParent(key, header: header)
        let name = key.parts[key.parts.count - 1]
        let shown = TOML.dottedKey(key.parts)
        try checkDepth(parent.depth + 2, at: key.marks[key.marks.count - 1])
        let element = TableNode(origin: .header, line: header.line, depth: parent.depth + 2)
        switch parent.slots[name] {
        case nil:
            parent.insert(name, .tableArray(TableArrayNode(first: element, line: header.line)))
        case .tableArray(let array)?:
            array.elements.append(element)
        case .table(let table)?:
            let how = switch table.origin {
            case .dotted: "defined with dotted keys on line \(table.line)"
            case .implicit: "implied by the header on line \(table.line)"
            default: "defined on line \(table.line)"
            }
            throw error("[[\(shown)]] conflicts with the table [\(shown)] \(how)", at: header)
        case .value(let value, let line)?:
            if case .array = value {
                throw error("'\(shown)' is an array value (line \(line)); [[\(shown)]] can only extend an array of "
                            + "tables", at: header)
            }
            throw error(notATable(value, shown, line: line), at: header)
        }
        return element
    }

    /// The table holding a header's last part: every table on the way may be passed through (the last element of
    /// an array of tables), missing ones are created as implicit.
    private mutating func headerParent(_ key: Key, header: Mark) throws(TOMLError) -> TableNode {
        var table = root
        for index in 0..<(key.parts.count - 1) {
            let name = key.parts[index]
            switch table.slots[name] {
            case nil:
                try checkDepth(table.depth + 1, at: key.marks[index])
                let child = TableNode(origin: .implicit, line: header.line, depth: table.depth + 1)
                table.insert(name, .table(child))
                table = child
            case .table(let child)?:
                table = child
            case .tableArray(let array)?:
                table = array.elements[array.elements.count - 1]
            case .value(let value, let line)?:
                throw error(notATable(value, TOML.dottedKey(key.parts[...index]), line: line), at: key.marks[index])
            }
        }
        return table
    }

    private func notATable(_ value: TOMLValue, _ shown: String, line: Int) -> String {
        switch value {
        case .table: "'\(shown)' is an inline table (line \(line)) and cannot be extended"
        case .array: "'\(shown)' is an array value (line \(line)), not a table"
        default: "'\(shown)' is \(value.typeDescription) (line \(line)), not a table"
        }
    }
}
