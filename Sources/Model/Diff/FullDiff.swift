/// The diff of two whole snapshots, for `replace` and for history walks too long to follow change by change.
///
/// A section whose item ids are the same in both versions contributes only data changes; in the others, the
/// common prefix and suffix stay untouched (they keep their order, which `SequenceDiff` exploits). The old items
/// in between (the *spans*) go into an `IDTable`; new items are matched by following the old order where they
/// can (untouched again: no entry) and by the table where they cannot, so a diff's entries, and the cost of the
/// moves, follow what changed. The same passes check the new snapshot's ids: repeats among the matched items are
/// caught by claiming, and an id not found in the spans is checked against the prefixes and suffixes.
struct FullDiff {
    private let old: [Section]
    private let new: [Section]
    private(set) var delta = Delta()
    private var oldKeys: [Int] = []
    /// Old items outside the untouched prefixes and suffixes: ids, places, and whether the new snapshot has them.
    private var spanIDs: [String] = []
    private var spanPlaces: [(section: Int32, index: Int32)] = []
    private var claimed: [Bool] = []
    /// New items that were not in the old snapshot.
    private var freshIDs: [String] = []
    /// By new section index: how many items at its start and end stay in place (all of them in `prefix` when the
    /// section's ids did not change).
    private var ends: [(prefix: Int, suffix: Int)] = []

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
    }

    private mutating func run() throws(ModelError) {
        try matchSections()
        ends = [(prefix: Int, suffix: Int)](repeating: (0, 0), count: new.count)
        // New item ranges to match by id, and old item ranges they may come from.
        var newSpans: [(key: Int, range: Range<Int>)] = []
        var oldSpans: [(key: Int, oldIndex: Int, range: Range<Int>)] = []
        for (index, section) in new.enumerated() {
            for item in section.items { try ModelError.check(id: item.id, what: "item") }
            guard let oldIndex = delta.sections[index].old else {
                newSpans.append((index, section.items.indices))
                continue
            }
            let before = old[oldIndex].items
            let after = section.items
            let (prefix, suffix) = FullDiff.commonEnds(before, after)
            ends[index] = (prefix, suffix)
            keep(0..<prefix, of: oldIndex, as: index)
            keep((after.count - suffix)..<after.count, of: oldIndex, as: index, shift: before.count - after.count)
            guard prefix + suffix < max(before.count, after.count) else { continue }
            delta.itemCounts[index] = (before.count, after.count)
            newSpans.append((index, prefix..<(after.count - suffix)))
            oldSpans.append((index, oldIndex, prefix..<(before.count - suffix)))
        }
        for (oldIndex, key) in oldKeys.enumerated() where delta.sectionNewIndex[key] == nil {
            oldSpans.append((key, oldIndex, old[oldIndex].items.indices))
        }
        var spanRange = [Range<Int>?](repeating: nil, count: delta.sectionIDs.count)
        for span in oldSpans {
            let start = spanIDs.count
            for i in span.range {
                spanIDs.append(old[span.oldIndex].items[i].id)
                spanPlaces.append((Int32(span.oldIndex), Int32(i)))
            }
            spanRange[span.key] = start..<spanIDs.count
        }
        claimed = [Bool](repeating: false, count: spanIDs.count)
        delta.reserveItems(delta.items.count + newSpans.reduce(0) { $0 + $1.range.count } + spanIDs.count / 8)
        let table = IDTable(positions: spanIDs.indices, of: spanIDs)
        for span in newSpans {
            let (matches, untouched) = try match(span.range, of: span.key, along: spanRange[span.key], table: table)
            record(span.range, of: span.key, matches: matches, untouched: untouched)
        }
        try checkFresh()
        for (position, place) in spanPlaces.enumerated() where !claimed[position] {
            let oldIndex = Int(place.section)
            let key = oldKeys[oldIndex]
            guard delta.sectionNewIndex[key] != nil else { continue }
            let oldPlace = Delta.Place(section: key, index: Int(place.index))
            delta.addItem(spanIDs[position], old: oldPlace, new: nil, structural: true, dataChanged: false)
        }
    }

    /// Keys the sections (new ones first, by new index), lists them all as touched, and notes data changes.
    private mutating func matchSections() throws(ModelError) {
        let newIDs = new.map(\.id)
        var table = IDTable(capacity: new.count)
        for (index, section) in new.enumerated() {
            try ModelError.check(id: section.id, what: "section")
            guard table.insert(index, of: newIDs) == nil else {
                throw ModelError(.duplicateID, "section id \(section.id.quotedAsJSON) appears twice")
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

    /// Items that stay at the same place (up to `shift` between the old and new index) in their section: only
    /// their data may have changed.
    private mutating func keep(_ range: Range<Int>, of oldIndex: Int, as key: Int, shift: Int = 0) {
        for i in range {
            let item = new[key].items[i]
            if old[oldIndex].items[i + shift].data != item.data {
                let place = Delta.Place(section: key, index: i)
                delta.addItem(item.id, old: nil, new: place, structural: false, dataChanged: true)
            }
        }
    }

    /// Matches new items to old items by id. Most items keep their order, so each is first compared with the
    /// old items of its section's span that follow the last match (a few ahead, past deleted or departed ones),
    /// and only looked up in the table when that fails; after two failures in a row, a lookup landing in the
    /// span resumes the order there. Claims what it matches: an old item claimed twice is a repeated id.
    ///
    /// The items matched by order whose old positions keep increasing are *untouched*: they are in both versions,
    /// in this section, in the same relative order, which is all `SequenceDiff` asks of untouched elements, so
    /// they need no structural entry. (The LIS still decides what moves.)
    /// - Returns: per new item of `range`, its position in the spans or -1 for a new item, and whether untouched.
    private mutating func match(_ range: Range<Int>, of key: Int, along span: Range<Int>?, table: IDTable)
        throws(ModelError) -> (matches: [Int], untouched: [Bool])
    {
        var matches = [Int](repeating: -1, count: range.count)
        var untouched = [Bool](repeating: false, count: range.count)
        let items = new[key].items
        var expected = span?.lowerBound ?? 0
        let end = span?.upperBound ?? 0
        var lastUntouched = -1
        var failures = 0
        for (offset, i) in range.enumerated() {
            let id = items[i].id
            var ahead = expected
            while ahead < min(expected + 4, end), claimed[ahead] || !spanIDs[ahead].hasSameBytes(as: id) { ahead += 1 }
            if ahead < min(expected + 4, end) {
                claimed[ahead] = true
                matches[offset] = ahead
                expected = ahead + 1
                failures = 0
                if ahead > lastUntouched {
                    untouched[offset] = true
                    lastUntouched = ahead
                }
                continue
            }
            failures += 1
            guard let position = table.find(id, in: spanIDs) else {
                freshIDs.append(id)
                continue
            }
            guard !claimed[position] else { throw FullDiff.duplicate(id) }
            claimed[position] = true
            matches[offset] = position
            if failures >= 2, span?.contains(position) == true { expected = position + 1 }
        }
        return (matches, untouched)
    }

    /// Records the matched and new items of a span: structural entries for the touched ones, data changes only
    /// for the untouched ones.
    private mutating func record(_ range: Range<Int>, of key: Int, matches: [Int], untouched: [Bool]) {
        let items = new[key].items
        for (offset, i) in range.enumerated() {
            let item = items[i]
            let position = matches[offset]
            let place = Delta.Place(section: key, index: i)
            guard position >= 0 else {
                delta.addItem(item.id, old: nil, new: place, structural: true, dataChanged: false)
                continue
            }
            let (section, index) = (Int(spanPlaces[position].section), Int(spanPlaces[position].index))
            let changed = old[section].items[index].data != item.data
            if untouched[offset] {
                if changed { delta.addItem(item.id, old: nil, new: place, structural: false, dataChanged: true) }
                continue
            }
            let oldPlace = Delta.Place(section: oldKeys[section], index: index)
            delta.addItem(item.id, old: oldPlace, new: place, structural: true, dataChanged: changed)
        }
    }

    /// Checks that the ids of new items not found among the old spans are neither repeated nor those of items
    /// kept in place, which the new snapshot holds already.
    private func checkFresh() throws(ModelError) {
        guard !freshIDs.isEmpty else { return }
        var fresh = IDTable(capacity: freshIDs.count)
        for position in freshIDs.indices {
            guard fresh.insert(position, of: freshIDs) == nil else { throw FullDiff.duplicate(freshIDs[position]) }
        }
        for (index, section) in new.enumerated() {
            let kept =
                section.items[0..<ends[index].prefix] + section.items[(section.items.count - ends[index].suffix)...]
            for item in kept where fresh.find(item.id, in: freshIDs) != nil { throw FullDiff.duplicate(item.id) }
        }
    }

    /// How many items at the start, and then at the end, have the same ids in both lists.
    private static func commonEnds(_ before: [Item], _ after: [Item]) -> (prefix: Int, suffix: Int) {
        let shorter = min(before.count, after.count)
        var prefix = 0
        while prefix < shorter, before[prefix].id.hasSameBytes(as: after[prefix].id) { prefix += 1 }
        var suffix = 0
        while suffix < shorter - prefix,
            before[before.count - 1 - suffix].id.hasSameBytes(as: after[after.count - 1 - suffix].id)
        {
            suffix += 1
        }
        return (prefix, suffix)
    }

    private static func duplicate(_ id: String) -> ModelError {
        ModelError(.duplicateID, "item id \(id.quotedAsJSON) appears twice")
    }
}
