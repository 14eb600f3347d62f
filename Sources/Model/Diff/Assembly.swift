/// Turns a `Delta` into a changeset that obeys API.md's five guarantees.
///
/// Sections: survivors in a heaviest increasing subsequence stay (*live*); the others move, unless their items
/// also changed order or membership, in which case they are *rebuilt* (deleted and inserted whole, rule 3).
/// Items: only live sections get item operations; an item moving between two live sections is a move, one
/// leaving a live section for an inserted or rebuilt one is a delete, one arriving in a live section from
/// elsewhere is an insert. Data changes of surviving items outside inserted sections are `updated` entries.
///
/// - Complexity: O(k log k) in the size k of the delta, plus the size of what the changeset lists.
func assembleChangeset(_ delta: Delta, new: some SectionSource, from: Version, to: Version) -> Changeset {
    var assembly = Assembly(delta: delta, new: new)
    return assembly.changeset(from: from, to: to)
}

private enum SectionStatus {
    case deleted, inserted, moved, rebuilt
}

private struct Assembly<Source: SectionSource> {
    let delta: Delta
    let new: Source
    var sectionDiff: SequenceDiff
    var touchedSections: [String: Delta.SectionEntry] = [:]
    /// Sections not listed here are live.
    var status: [String: SectionStatus] = [:]
    var newSectionIndex: [String: Int] = [:]
    var sections = SectionChanges()
    var items = ItemChanges()

    init(delta: Delta, new: Source) {
        self.delta = delta
        self.new = new
        sectionDiff = SequenceDiff(oldCount: 0, newCount: 0, entries: [])
        for entry in delta.sections { touchedSections[entry.id] = entry }
    }

    mutating func changeset(from: Version, to: Version) -> Changeset {
        let itemDiffs = diffDirtySections()
        var preferred: [Int] = []
        for (id, diff) in itemDiffs where !diff.diff.isEmpty { preferred.append(newIndex(ofSection: id)) }
        sectionDiff = SequenceDiff(
            oldCount: delta.oldSectionCount, newCount: new.sectionCount,
            entries: delta.sections.map { SequenceDiff.Entry(old: $0.old, new: $0.new) }, preferred: preferred.sorted())
        classifySections()
        for (id, diff) in itemDiffs where status[id] == .moved && !diff.diff.isEmpty { status[id] = .rebuilt }
        emitSections()
        for (id, diff) in itemDiffs where status[id] == nil { emitMoves(in: id, diff: diff.diff, ids: diff.entries) }
        emitItems()
        sections.deleted.sort { $0.index < $1.index }
        sections.inserted.sort { $0.index < $1.index }
        sections.moved.sort { $0.from < $1.from }
        sections.updated.sort { $0.index < $1.index }
        items.deleted.sort { $0.at < $1.at }
        items.inserted.sort { $0.at < $1.at }
        items.moved.sort { $0.from < $1.from }
        items.updated.sort { $0.at < $1.at }
        return Changeset(from: from, to: to, sections: sections, items: items)
    }

    private mutating func classifySections() {
        for (position, entry) in delta.sections.enumerated() {
            switch (entry.old, entry.new) {
            case (_?, nil): status[entry.id] = .deleted
            case (nil, _?): status[entry.id] = .inserted
            default: if sectionDiff.moved[position] { status[entry.id] = .moved }
            }
        }
        for run in sectionDiff.movedRuns {
            for offset in 0..<run.count { status[new.sectionID(at: run.new + offset)] = .moved }
        }
    }

    /// Diffs the items of every section present in both versions that gained, lost or moved items.
    private mutating func diffDirtySections() -> [String: (diff: SequenceDiff, entries: [Int])] {
        var members: [String: [Int]] = [:]
        for (position, entry) in delta.items.enumerated() where entry.structural {
            if let old = entry.old { members[old.section, default: []].append(position) }
            if let new = entry.new, new.section != entry.old?.section {
                members[new.section, default: []].append(position)
            }
        }
        var diffs: [String: (diff: SequenceDiff, entries: [Int])] = [:]
        for (id, positions) in members {
            if let entry = touchedSections[id], entry.old == nil || entry.new == nil { continue }
            guard let counts = delta.itemCounts[id] else { continue }
            let entries = positions.map { position in
                let entry = delta.items[position]
                return SequenceDiff.Entry(
                    old: entry.old?.section == id ? entry.old?.index : nil,
                    new: entry.new?.section == id ? entry.new?.index : nil)
            }
            diffs[id] = (SequenceDiff(oldCount: counts.old, newCount: counts.new, entries: entries), positions)
        }
        return diffs
    }

    private mutating func newIndex(ofSection id: String) -> Int {
        if let index = newSectionIndex[id] { return index }
        let index = touchedSections[id]?.new ?? new.sectionIndex(of: id)!
        newSectionIndex[id] = index
        return index
    }

    private mutating func oldIndex(ofSection id: String) -> Int {
        if let entry = touchedSections[id] { return entry.old! }
        return sectionDiff.oldIndex(ofUntouchedAt: newIndex(ofSection: id))
    }

    private mutating func emitSections() {
        for entry in delta.sections {
            if let old = entry.old, entry.new == nil {
                sections.deleted.append(SectionDeletion(index: old, id: entry.id))
            }
            if let index = entry.new, entry.old == nil {
                sections.inserted.append(SectionInsertion(index: index, section: new.section(at: index)))
            }
        }
        for (id, status) in status where status == .moved || status == .rebuilt {
            let from = oldIndex(ofSection: id)
            let to = newIndex(ofSection: id)
            if status == .moved {
                sections.moved.append(SectionMove(from: from, to: to, id: id))
            } else {
                sections.deleted.append(SectionDeletion(index: from, id: id))
                sections.inserted.append(SectionInsertion(index: to, section: new.section(at: to)))
            }
        }
        for id in delta.changedSectionData where status[id] == nil || status[id] == .moved {
            let index = newIndex(ofSection: id)
            sections.updated.append(SectionUpdate(index: index, id: id, data: new.sectionData(at: index)))
        }
    }

    /// Moves within one live section: its touched survivors and untouched runs outside the kept subsequence.
    private mutating func emitMoves(in id: String, diff: SequenceDiff, ids positions: [Int]) {
        let oldSection = oldIndex(ofSection: id)
        let newSection = newIndex(ofSection: id)
        for (offset, position) in positions.enumerated() {
            let entry = delta.items[position]
            guard diff.moved[offset], let old = entry.old, let new = entry.new else { continue }
            items.moved.append(
                ItemMove(
                    from: IndexPath(section: oldSection, item: old.index),
                    to: IndexPath(section: newSection, item: new.index), id: entry.id))
        }
        for run in diff.movedRuns {
            for offset in 0..<run.count {
                let to = IndexPath(section: newSection, item: run.new + offset)
                items.moved.append(
                    ItemMove(
                        from: IndexPath(section: oldSection, item: run.old + offset), to: to, id: new.item(at: to).id))
            }
        }
    }

    /// Items that enter or leave a section, and data changes.
    private mutating func emitItems() {
        for entry in delta.items {
            let changesSection = entry.structural && entry.old?.section != entry.new?.section
            let fromLive = entry.old.map { status[$0.section] == nil } ?? false
            let toLive = entry.new.map { status[$0.section] == nil } ?? false
            if changesSection {
                if fromLive, let old = entry.old {
                    let from = IndexPath(section: oldIndex(ofSection: old.section), item: old.index)
                    if toLive, let new = entry.new {
                        let to = IndexPath(section: newIndex(ofSection: new.section), item: new.index)
                        items.moved.append(ItemMove(from: from, to: to, id: entry.id))
                    } else {
                        items.deleted.append(ItemDeletion(at: from, id: entry.id))
                    }
                } else if toLive, let new = entry.new {
                    let at = IndexPath(section: newIndex(ofSection: new.section), item: new.index)
                    items.inserted.append(ItemInsertion(at: at, item: self.new.item(at: at)))
                }
            }
            guard entry.dataChanged, let new = entry.new else { continue }
            let newStatus = status[new.section]
            guard newStatus == nil || newStatus == .moved, !(changesSection && !fromLive) else {
                continue
            }
            let at = IndexPath(section: newIndex(ofSection: new.section), item: new.index)
            items.updated.append(ItemUpdate(at: at, item: self.new.item(at: at)))
        }
    }
}
