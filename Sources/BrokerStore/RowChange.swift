/// One change to the stored cache; a batch of them is applied atomically by `CacheDatabase.apply`.
public enum RowChange: Sendable {
    /// Inserts the row, or replaces the row with the same section and key.
    case put(StoredRow)
    case delete(section: String, key: String)
    /// Removes every entry (the key check and schema stay).
    case deleteAll
}

extension RowChange {
    /// The offsets of the changes in (section, key) order, each row's own changes and every `deleteAll` kept where
    /// they were. Written in the primary key's order, a large batch fills one B-tree page after another. In the
    /// cache's hash order each row landed on another page than the last, more pages than SQLite's page cache holds,
    /// so pages were read back from the WAL and written again.
    static func keyOrder(_ changes: [RowChange]) -> [Int] {
        guard changes.count > 1 else { return Array(changes.indices) }
        var order: [Int] = []
        order.reserveCapacity(changes.count)
        // Offsets are handed out, not changes: a change copied holds its row's five references.
        var run: [(section: String, key: String, offset: Int)] = []
        func flush() {
            run.sort { a, b in
                if a.section != b.section { return a.section < b.section }
                return a.key != b.key ? a.key < b.key : a.offset < b.offset
            }
            order.append(contentsOf: run.lazy.map(\.offset))
            run.removeAll(keepingCapacity: true)
        }
        for (offset, change) in changes.enumerated() {
            if let place = change.place {
                run.append((place.section, place.key, offset))
            } else {
                flush()
                order.append(offset)  // a deleteAll, where it was
            }
        }
        flush()
        return order
    }

    /// The row a change is about; nil for `deleteAll`, which is about every row.
    var place: (section: String, key: String)? {
        switch self {
        case .put(let row): return (row.section, row.key)
        case .delete(let section, let key): return (section, key)
        case .deleteAll: return nil
        }
    }
}
