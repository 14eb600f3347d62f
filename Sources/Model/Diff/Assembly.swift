/// Turns a `Delta` into a changeset that obeys the five rules of `docs/changesets.md#the-rules`.
///
/// Sections: survivors in a heaviest increasing subsequence stay (*live*); the others move, unless their items
/// also changed order or membership, in which case they are *rebuilt* (deleted and inserted whole, `#rule-3`). When
/// several subsequences are as long, the one keeping sections whose items changed is preferred.
/// Items: only live sections get item operations; an item moving between two live sections is a move, one
/// leaving a live section for an inserted or rebuilt one is a delete, one arriving in a live section from
/// elsewhere is an insert. Data changes of surviving items outside inserted sections are `updated` entries;
/// an item listed as inserted carries its data and is not listed again.
///
/// - Complexity: O(k log k) in the size k of the delta, plus the size of what the changeset lists.
func assembleChangeset(_ delta: Delta, new: some SectionSource, from: Version, to: Version) -> Changeset {
    var assembly = Assembly(delta: delta, new: new)
    return assembly.changeset(from: from, to: to)
}

private enum SectionStatus {
    case live, deleted, inserted, moved, rebuilt
}

private struct Assembly<Source: SectionSource> {
    let delta: Delta
    let new: Source
    var sectionDiff = SequenceDiff(oldCount: 0, newCount: 0, entries: [])
    /// By section key: its position in `delta.sections`, or -1 when untouched.
    var touched: [Int]
    var status: [SectionStatus]
    /// New indices of moved sections the delta had no key for (untouched, with no item or data change).
    var unkeyedMoves: [Int] = []
    var sections = SectionChanges()
    var items = ItemChanges()

    init(delta: Delta, new: Source) {
        self.delta = delta
        self.new = new
        touched = [Int](repeating: -1, count: delta.sectionIDs.count)
        status = [SectionStatus](repeating: .live, count: delta.sectionIDs.count)
        for (position, entry) in delta.sections.enumerated() {
            touched[entry.key] = position
            if entry.new == nil {
                status[entry.key] = .deleted
            } else if entry.old == nil {
                status[entry.key] = .inserted
            }
        }
    }

    mutating func changeset(from: Version, to: Version) -> Changeset {
        let itemDiffs = diffDirtySections()
        let preferred = itemDiffs.filter { !$0.diff.isEmpty }.map { delta.sectionNewIndex[$0.key]! }
        sectionDiff = SequenceDiff(
            oldCount: delta.oldSectionCount, newCount: new.sectionCount,
            entries: delta.sections.map { SequenceDiff.Entry(old: $0.old, new: $0.new) }, preferred: preferred.sorted())
        classifySections()
        for dirty in itemDiffs where status[dirty.key] == .moved && !dirty.diff.isEmpty { status[dirty.key] = .rebuilt }
        emitSections()
        for dirty in itemDiffs where status[dirty.key] == .live {
            emitMoves(in: dirty.key, diff: dirty.diff, entries: dirty.entries)
        }
        emitItems()
        sections.sortByFirstIndex()
        items.sortByFirstIndex()
        return Changeset(from: from, to: to, sections: sections, items: items)
    }

    private mutating func classifySections() {
        for (position, entry) in delta.sections.enumerated() where entry.old != nil && entry.new != nil {
            if sectionDiff.moved[position] { status[entry.key] = .moved }
        }
        guard !sectionDiff.movedRuns.isEmpty else { return }
        var keyAtNewIndex: [Int: Int] = [:]
        for (key, index) in delta.sectionNewIndex.enumerated() { if let index { keyAtNewIndex[index] = key } }
        for run in sectionDiff.movedRuns {
            for index in run.new..<(run.new + run.count) {
                if let key = keyAtNewIndex[index] { status[key] = .moved } else { unkeyedMoves.append(index) }
            }
        }
    }

    /// Diffs the items of every section present in both versions that gained, lost or moved items.
    private func diffDirtySections() -> [(key: Int, diff: SequenceDiff, entries: ArraySlice<Int>)] {
        // The structural entries of each section, bucketed by key (an entry changing section is in two buckets).
        var counts = [Int](repeating: 0, count: delta.sectionIDs.count + 1)
        for entry in delta.items where entry.structural {
            if let old = entry.old { counts[old.section + 1] += 1 }
            if let new = entry.new, new.section != entry.old?.section { counts[new.section + 1] += 1 }
        }
        for key in delta.sectionIDs.indices { counts[key + 1] += counts[key] }
        var next = counts
        var members = [Int](repeating: 0, count: counts[delta.sectionIDs.count])
        for (position, entry) in delta.items.enumerated() where entry.structural {
            if let old = entry.old {
                members[next[old.section]] = position
                next[old.section] += 1
            }
            if let new = entry.new, new.section != entry.old?.section {
                members[next[new.section]] = position
                next[new.section] += 1
            }
        }
        var diffs: [(key: Int, diff: SequenceDiff, entries: ArraySlice<Int>)] = []
        for key in delta.sectionIDs.indices where counts[key + 1] > counts[key] {
            guard status[key] != .deleted, status[key] != .inserted, let itemCounts = delta.itemCounts[key] else {
                continue
            }
            let positions = members[counts[key]..<counts[key + 1]]
            let entries = positions.map { position in
                let entry = delta.items[position]
                return SequenceDiff.Entry(
                    old: entry.old?.section == key ? entry.old?.index : nil,
                    new: entry.new?.section == key ? entry.new?.index : nil)
            }
            diffs.append(
                (key, SequenceDiff(oldCount: itemCounts.old, newCount: itemCounts.new, entries: entries), positions))
        }
        return diffs
    }

    private func newIndex(of key: Int) -> Int { delta.sectionNewIndex[key]! }

    private func oldIndex(of key: Int) -> Int {
        if touched[key] >= 0 { return delta.sections[touched[key]].old! }
        return sectionDiff.oldIndex(ofUntouchedAt: newIndex(of: key))
    }

    private mutating func emitSections() {
        for entry in delta.sections {
            if let old = entry.old, entry.new == nil {
                sections.deleted.append(SectionDeletion(index: old, id: delta.sectionIDs[entry.key]))
            }
            if let index = entry.new, entry.old == nil {
                sections.inserted.append(SectionInsertion(index: index, section: new.section(at: index)))
            }
        }
        for key in status.indices where status[key] == .moved || status[key] == .rebuilt {
            let from = oldIndex(of: key)
            let to = newIndex(of: key)
            if status[key] == .moved {
                sections.moved.append(SectionMove(from: from, to: to, id: delta.sectionIDs[key]))
            } else {
                sections.deleted.append(SectionDeletion(index: from, id: delta.sectionIDs[key]))
                sections.inserted.append(SectionInsertion(index: to, section: new.section(at: to)))
            }
        }
        for index in unkeyedMoves {
            let from = sectionDiff.oldIndex(ofUntouchedAt: index)
            sections.moved.append(SectionMove(from: from, to: index, id: new.sectionID(at: index)))
        }
        for key in delta.changedSectionData where status[key] == .live || status[key] == .moved {
            let index = newIndex(of: key)
            sections.updated.append(
                SectionUpdate(index: index, id: delta.sectionIDs[key], data: new.sectionData(at: index)))
        }
    }

    /// Moves within one live section: its touched survivors and untouched runs outside the kept subsequence.
    private mutating func emitMoves(in key: Int, diff: SequenceDiff, entries positions: ArraySlice<Int>) {
        let oldSection = oldIndex(of: key)
        let newSection = newIndex(of: key)
        for (offset, position) in positions.enumerated() where diff.moved[offset] {
            let entry = delta.items[position]
            guard let old = entry.old, let new = entry.new else { continue }
            items.moved.append(
                ItemMove(
                    from: ItemPath(section: oldSection, item: old.index),
                    to: ItemPath(section: newSection, item: new.index), id: delta.itemIDs[position]))
        }
        for run in diff.movedRuns {
            for offset in 0..<run.count {
                let to = ItemPath(section: newSection, item: run.new + offset)
                let from = ItemPath(section: oldSection, item: run.old + offset)
                items.moved.append(ItemMove(from: from, to: to, id: new.item(at: to).id))
            }
        }
    }

    /// Items that enter or leave a section, and data changes.
    private mutating func emitItems() {
        for (position, entry) in delta.items.enumerated() {
            let changesSection = entry.structural && entry.old?.section != entry.new?.section
            let fromLive = entry.old.map { status[$0.section] == .live } ?? false
            let toLive = entry.new.map { status[$0.section] == .live } ?? false
            if changesSection {
                if fromLive, let old = entry.old {
                    let from = ItemPath(section: oldIndex(of: old.section), item: old.index)
                    if toLive, let new = entry.new {
                        let to = ItemPath(section: newIndex(of: new.section), item: new.index)
                        items.moved.append(ItemMove(from: from, to: to, id: delta.itemIDs[position]))
                    } else {
                        items.deleted.append(ItemDeletion(at: from, id: delta.itemIDs[position]))
                    }
                } else if toLive, let new = entry.new {
                    let at = ItemPath(section: newIndex(of: new.section), item: new.index)
                    items.inserted.append(ItemInsertion(at: at, item: self.new.item(at: at)))
                }
            }
            guard entry.dataChanged, let new = entry.new else { continue }
            guard status[new.section] == .live || status[new.section] == .moved, !(changesSection && !fromLive) else {
                continue
            }
            let at = ItemPath(section: newIndex(of: new.section), item: new.index)
            items.updated.append(ItemUpdate(at: at, item: self.new.item(at: at)))
        }
    }
}
