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

    /// Checks the changeset's move counts; returns a description of the first mismatch, or nil.
    public static func mismatch(_ changeset: Changeset, old: [Section], new: [Section]) -> String? {
        let rebuilt = Set(changeset.sections.deleted.map(\.id)).intersection(
            changeset.sections.inserted.map(\.section.id))
        let oldIndex = Dictionary(uniqueKeysWithValues: old.enumerated().map { ($0.element.id, $0.offset) })
        let survivors = new.compactMap { oldIndex[$0.id] }.filter { !rebuilt.contains(old[$0].id) }
        let sectionMoves = survivors.count - lisLength(survivors)
        if changeset.sections.moved.count != sectionMoves {
            return "section moves \(changeset.sections.moved.count), minimum \(sectionMoves)"
        }
        let moved = Set(changeset.sections.moved.map(\.id))
        var expectedItemMoves = 0
        for section in new
        where oldIndex[section.id] != nil && !moved.contains(section.id) && !rebuilt.contains(section.id) {
            let before = old[oldIndex[section.id]!]
            let position = Dictionary(
                uniqueKeysWithValues: before.items.enumerated().map { ($0.element.id, $0.offset) })
            let stay = section.items.compactMap { position[$0.id] }
            expectedItemMoves += stay.count - lisLength(stay)
        }
        var oldSectionOfItem = [String: String]()
        for section in old { for item in section.items { oldSectionOfItem[item.id] = section.id } }
        let within = changeset.items.moved.filter { move in
            new.indices.contains(move.to.section) && oldSectionOfItem[move.id] == new[move.to.section].id
        }
        if within.count != expectedItemMoves {
            return "item moves within sections \(within.count), minimum \(expectedItemMoves)"
        }
        return nil
    }
}
