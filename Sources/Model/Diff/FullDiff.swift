/// The diff of two whole snapshots, for `replace` and for history walks too long to follow change by change.
///
/// Items are matched by id through one `IDTable` of the old items. A section whose item ids are the same in
/// both versions contributes only data changes; in the others, the common prefix and suffix stay untouched
/// (they keep their order, which `SequenceDiff` exploits), so one move in a long list touches only the span
/// between its two ends. The same pass checks the new snapshot's ids.
struct FullDiff {
    private let old: [Section]
    private let new: [Section]
    private(set) var delta = Delta()
    /// The old items, flattened, with the table finding them by id and whether the new snapshot claimed each.
    private var oldIDs: [String] = []
    private var oldOffsets: [Int] = []
    private var oldSectionOf: [Int32] = []
    private var oldKeys: [Int] = []
    private var oldTable: IDTable
    private var claimed: [Bool]
    /// Ids of new items not in the old snapshot, to catch repeats among them.
    private var freshIDs: [String] = []
    private var freshTable: IDTable

    /// The delta from `old` to `new`.
    /// - Throws: `invalid_id` or `duplicate_id` for an invalid or repeated id in `new`.
    /// - Precondition: `old` has valid, unique ids.
    /// - Complexity: O(n) hashing plus O(n log n) for the moves, n the size of both snapshots.
    static func delta(from old: [Section], to new: [Section]) throws(ModelError) -> Delta {
        var diff = FullDiff(old: old, new: new)
        try diff.run()
        return diff.delta
    }

    private init(old: [Section], new: [Section]) {
        self.old = old
        self.new = new
        var total = 0
        for section in old {
            oldOffsets.append(total)
            total += section.items.count
        }
        oldIDs.reserveCapacity(total)
        oldSectionOf.reserveCapacity(total)
        for (index, section) in old.enumerated() {
            oldIDs.append(contentsOf: section.items.lazy.map(\.id))
            oldSectionOf.append(contentsOf: repeatElement(Int32(index), count: section.items.count))
        }
        oldTable = IDTable(capacity: total)
        for position in oldIDs.indices { _ = oldTable.insert(position, of: oldIDs) }
        claimed = [Bool](repeating: false, count: total)
        freshTable = IDTable(capacity: 16)
    }

    private mutating func run() throws(ModelError) {
        try matchSections()
        var dirty: [(key: Int, oldIndex: Int, range: Range<Int>)] = []
        for (index, section) in new.enumerated() {
            for item in section.items { try ModelError.check(id: item.id, what: "item") }
            guard let oldIndex = delta.sections[index].old else {
                try matchItems(section.items.indices, of: index)
                continue
            }
            let before = old[oldIndex].items
            let after = section.items
            var prefix = 0
            while prefix < min(before.count, after.count), before[prefix].id == after[prefix].id { prefix += 1 }
            var suffix = 0
            while suffix < min(before.count, after.count) - prefix,
                before[before.count - 1 - suffix].id == after[after.count - 1 - suffix].id
            {
                suffix += 1
            }
            try keep(0..<prefix, of: oldIndex, as: index)
            try keep((after.count - suffix)..<after.count, of: oldIndex, as: index, shift: before.count - after.count)
            guard prefix + suffix < max(before.count, after.count) else { continue }
            delta.itemCounts[index] = (before.count, after.count)
            try matchItems(prefix..<(after.count - suffix), of: index)
            dirty.append((index, oldIndex, prefix..<(before.count - suffix)))
        }
        for (key, oldIndex, range) in dirty {
            for i in range where !claimed[oldOffsets[oldIndex] + i] {
                let place = Delta.Place(section: key, index: i)
                delta.items.append(
                    .init(id: old[oldIndex].items[i].id, old: place, new: nil, structural: true, dataChanged: false))
            }
        }
    }

    /// Keys the sections (new ones first, by new index), lists them all as touched, and notes data changes.
    private mutating func matchSections() throws(ModelError) {
        let newIDs = new.map(\.id)
        var table = IDTable(capacity: new.count)
        for (index, section) in new.enumerated() {
            try ModelError.check(id: section.id, what: "section")
            guard table.insert(index, of: newIDs) == nil else {
                throw ModelError(.duplicateID, "section id \(section.id.debugDescription) appears twice")
            }
            _ = delta.addSection(id: section.id, newIndex: index)
            delta.sections.append(.init(key: index, old: nil, new: index))
        }
        delta.oldSectionCount = old.count
        for (oldIndex, section) in old.enumerated() {
            if let index = table.find(section.id, in: newIDs) {
                delta.sections[index].old = oldIndex
                if section.data != new[index].data { delta.changedSectionData.append(index) }
                oldKeys.append(index)
            } else {
                let key = delta.addSection(id: section.id, newIndex: nil)
                delta.sections.append(.init(key: key, old: oldIndex, new: nil))
                oldKeys.append(key)
            }
        }
    }

    /// Claims items that stay at the same place (up to `shift` between the old and new index) in their section.
    private mutating func keep(_ range: Range<Int>, of oldIndex: Int, as key: Int, shift: Int = 0) throws(ModelError) {
        for i in range {
            let item = new[key].items[i]
            try claim(oldOffsets[oldIndex] + i + shift, id: item.id)
            if old[oldIndex].items[i + shift].data != item.data {
                let place = Delta.Place(section: key, index: i)
                delta.items.append(.init(id: item.id, old: nil, new: place, structural: false, dataChanged: true))
            }
        }
    }

    /// Matches new items by id: each becomes a structural entry, with its old place when it had one.
    private mutating func matchItems(_ range: Range<Int>, of key: Int) throws(ModelError) {
        for i in range {
            let item = new[key].items[i]
            let place = Delta.Place(section: key, index: i)
            guard let position = oldTable.find(item.id, in: oldIDs) else {
                freshIDs.append(item.id)
                guard freshTable.insert(freshIDs.count - 1, of: freshIDs) == nil else { throw duplicate(item.id) }
                if freshIDs.count * 2 > freshTable.capacity { rehashFresh() }
                delta.items.append(.init(id: item.id, old: nil, new: place, structural: true, dataChanged: false))
                continue
            }
            try claim(position, id: item.id)
            let oldIndex = Int(oldSectionOf[position])
            let before = old[oldIndex].items[position - oldOffsets[oldIndex]]
            let oldPlace = Delta.Place(section: oldKeys[oldIndex], index: position - oldOffsets[oldIndex])
            delta.items.append(
                .init(id: item.id, old: oldPlace, new: place, structural: true, dataChanged: before.data != item.data))
        }
    }

    private mutating func claim(_ position: Int, id: String) throws(ModelError) {
        guard !claimed[position] else { throw duplicate(id) }
        claimed[position] = true
    }

    private func duplicate(_ id: String) -> ModelError {
        ModelError(.duplicateID, "item id \(id.debugDescription) appears twice")
    }

    private mutating func rehashFresh() {
        freshTable = IDTable(capacity: freshIDs.count * 2)
        for position in freshIDs.indices { _ = freshTable.insert(position, of: freshIDs) }
    }
}

extension Changeset {
    /// The changeset that takes `old` to `new`, obeying API.md's five guarantees.
    /// - Throws: `invalid_id` or `duplicate_id` when `new` has an invalid or repeated id.
    /// - Precondition: `old` has valid, unique ids.
    /// - Complexity: O(n log n) with hashing on ids, n the size of both snapshots.
    public static func diff(from old: [Section], to new: [Section], versions: (from: Version, to: Version))
        throws(ModelError) -> Changeset
    {
        let delta = try FullDiff.delta(from: old, to: new)
        return assembleChangeset(delta, new: SnapshotSource(sections: new), from: versions.from, to: versions.to)
    }
}
