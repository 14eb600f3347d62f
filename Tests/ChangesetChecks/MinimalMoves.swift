import Model

/// The number of moves `docs/changesets.md#rule-4` allows, computed independently of Model: survivors minus a
/// longest increasing subsequence, for the sections and for the items staying in each live section.
public enum MinimalMoves {
    public static func lisLength(_ keys: [Int]) -> Int {
        var tails: [Int] = []
        for key in keys {
            var low = 0
            var high = tails.count
            while low < high {
                let mid = (low + high) / 2
                if tails[mid] < key { low = mid + 1 } else { high = mid }
            }
            if low == tails.count { tails.append(key) } else { tails[low] = key }
        }
        return tails.count
    }

    /// An id as the contract compares it: by its bytes (Swift's `String` equality merges canonically equivalent
    /// ids).
    static func key(_ id: String) -> [UInt8] { Array(id.utf8) }

    /// Checks the changeset's move counts; returns a description of the first mismatch, or nil.
    public static func mismatch(_ changeset: Changeset, old: [Section], new: [Section]) -> String? {
        let rebuilt = Set(changeset.sections.deleted.map { key($0.id) }).intersection(
            changeset.sections.inserted.map { key($0.section.id) })
        let oldIndex = Dictionary(uniqueKeysWithValues: old.enumerated().map { (key($0.element.id), $0.offset) })
        let survivors = new.compactMap { oldIndex[key($0.id)] }.filter { !rebuilt.contains(key(old[$0].id)) }
        let sectionMoves = survivors.count - lisLength(survivors)
        if changeset.sections.moved.count != sectionMoves {
            return "section moves \(changeset.sections.moved.count), minimum \(sectionMoves)"
        }
        let moved = Set(changeset.sections.moved.map { key($0.id) })
        var expectedItemMoves = 0
        for section in new {
            let id = key(section.id)
            guard let oldSection = oldIndex[id], !moved.contains(id), !rebuilt.contains(id) else { continue }
            let position = Dictionary(
                uniqueKeysWithValues: old[oldSection].items.enumerated().map { (key($0.element.id), $0.offset) })
            let stay = section.items.compactMap { position[key($0.id)] }
            expectedItemMoves += stay.count - lisLength(stay)
        }
        var oldSectionOfItem = [[UInt8]: [UInt8]]()
        for section in old { for item in section.items { oldSectionOfItem[key(item.id)] = key(section.id) } }
        let within = changeset.items.moved.filter { move in
            new.indices.contains(move.to.section) && oldSectionOfItem[key(move.id)] == key(new[move.to.section].id)
        }
        if within.count != expectedItemMoves {
            return "item moves within sections \(within.count), minimum \(expectedItemMoves)"
        }
        return nil
    }
}
