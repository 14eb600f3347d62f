/// The diff of two whole snapshots, for `replace` and for history walks too long to follow change by change.
enum FullDiff {
    /// The delta from `old` to `new`. Sections whose item ids are the same in both contribute only their data
    /// changes; the items of the other sections are matched by id.
    /// - Precondition: both snapshots have valid, unique ids.
    /// - Complexity: O(n) hashing plus O(n log n) for the moves, n the size of both snapshots.
    static func delta(from old: [Section], to new: SnapshotSource) -> Delta {
        var delta = Delta()
        delta.oldSectionCount = old.count
        var oldSectionIndex: [String: Int] = [:]
        oldSectionIndex.reserveCapacity(old.count)
        for (index, section) in old.enumerated() { oldSectionIndex[section.id] = index }

        var dirtyOld = [Bool](repeating: true, count: old.count)
        var dirtyNew = [Bool](repeating: true, count: new.sections.count)
        for (index, section) in new.sections.enumerated() {
            guard let oldIndex = oldSectionIndex[section.id] else {
                delta.sections.append(.init(id: section.id, old: nil, new: index))
                continue
            }
            delta.sections.append(.init(id: section.id, old: oldIndex, new: index))
            let before = old[oldIndex]
            if before.data != section.data { delta.changedSectionData.append(section.id) }
            if before.items.elementsEqual(section.items, by: { $0.id == $1.id }) {
                dirtyOld[oldIndex] = false
                dirtyNew[index] = false
                for (i, (a, b)) in zip(before.items, section.items).enumerated() where a.data != b.data {
                    let place = Delta.Place(section: section.id, index: i)
                    delta.items.append(.init(id: b.id, old: place, new: place, structural: false, dataChanged: true))
                }
            } else {
                delta.itemCounts[section.id] = (before.items.count, section.items.count)
            }
        }
        for (index, section) in old.enumerated() where new.index[section.id] == nil {
            delta.sections.append(.init(id: section.id, old: index, new: nil))
        }

        var oldItems: [String: (place: Delta.Place, data: JSONData)] = [:]
        for (index, section) in old.enumerated() where dirtyOld[index] {
            for (i, item) in section.items.enumerated() {
                oldItems[item.id] = (Delta.Place(section: section.id, index: i), item.data)
            }
        }
        for (index, section) in new.sections.enumerated() where dirtyNew[index] {
            for (i, item) in section.items.enumerated() {
                let before = oldItems.removeValue(forKey: item.id)
                delta.items.append(
                    .init(
                        id: item.id, old: before?.place, new: Delta.Place(section: section.id, index: i),
                        structural: true, dataChanged: before.map { $0.data != item.data } ?? false))
            }
        }
        for (id, before) in oldItems {
            delta.items.append(.init(id: id, old: before.place, new: nil, structural: true, dataChanged: false))
        }
        return delta
    }
}

/// A snapshot with its sections indexed by id, read as the new version of a diff.
struct SnapshotSource: SectionSource {
    let sections: [Section]
    let index: [String: Int]

    /// - Precondition: section ids are unique.
    init(_ sections: [Section]) {
        self.sections = sections
        var index: [String: Int] = [:]
        index.reserveCapacity(sections.count)
        for (position, section) in sections.enumerated() { index[section.id] = position }
        self.index = index
    }

    var sectionCount: Int { sections.count }
    func sectionIndex(of id: String) -> Int? { index[id] }
    func sectionID(at index: Int) -> String { sections[index].id }
    func sectionData(at index: Int) -> JSONData { sections[index].data }
    func section(at index: Int) -> Section { sections[index] }
    func item(at path: IndexPath) -> Item { sections[path.section].items[path.item] }
}

extension Changeset {
    /// The changeset that takes `old` to `new`, obeying API.md's five guarantees.
    /// - Throws: `invalid_id` or `duplicate_id` when `new` has an invalid or repeated id.
    /// - Precondition: `old` has valid, unique ids.
    /// - Complexity: O(n log n) with hashing on ids, n the size of both snapshots.
    public static func diff(from old: [Section], to new: [Section], versions: (from: Version, to: Version))
        throws(ModelError) -> Changeset
    {
        try Store().checkNew(sections: new)
        let source = SnapshotSource(new)
        return assembleChangeset(
            FullDiff.delta(from: old, to: source), new: source, from: versions.from, to: versions.to)
    }
}
