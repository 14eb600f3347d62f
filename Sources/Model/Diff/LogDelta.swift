/// Builds a `Delta` from a change log and the store it led to, at the cost of what the log touched rather than
/// the size of the collection: this is how a single op on a million items yields its changeset in microseconds,
/// and how the feed coalesces many small mutations.
///
/// It walks the log backwards from the current positions of the touched sections and items, undoing each change
/// on those positions only, which gives their positions in the old version; data changes are read from the
/// values the log kept. Untouched elements need no work: they keep their relative order. Nor do items whose
/// only traces are their removal from a section that is gone in the end, or their insertion into a section
/// born within the log: where they were, or are, never shows in a changeset (a deleted section's items are not
/// listed, an inserted one carries its own), which keeps deleting or inserting a large section cheap.
enum LogDelta {
    /// The work budget, in tracked-position updates, beyond which the caller should rather diff in full.
    static func budget(itemCount: Int) -> Int { max(1 << 20, 8 * itemCount) }

    /// The delta, or nil when the log replaced the whole content or would cost more than `budget` to follow.
    /// - Complexity: O(e × t) for e changes touching t elements (bounded by the budget), plus O(t log n) lookups.
    static func delta(for log: some BidirectionalCollection<Change>, in store: Store) -> Delta? {
        var walk = Walk(store: store)
        for change in log {
            guard walk.collect(change) else { return nil }
        }
        let followed = log.count - walk.skipped
        let work = followed.multipliedReportingOverflow(by: walk.itemIDs.count + walk.sectionIDs.count)
        guard !work.overflow, work.partialValue + walk.skipped <= budget(itemCount: store.itemCount) else {
            return nil
        }
        walk.start()
        for change in log.reversed() { walk.undo(change) }
        return walk.delta()
    }
}

/// Where a tracked item is during the walk: its section's id and its index there.
private struct WalkPlace {
    var section: String
    var index: Int
}

/// What an element was in the old version, as far as the log says.
private enum OldValue {
    case absent
    case present(JSONData)
}

private struct Walk {
    let store: Store
    var sectionIDs: [String] = []
    var sectionTracker: [ExactString: Int] = [:]
    var itemIDs: [String] = []
    var itemTracker: [ExactString: Int] = [:]
    /// Items whose data was set, in the order first seen; those also tracked are handled as tracked.
    var dataOnlyItems: [String] = []
    var dataItems: Set<ExactString> = []
    var dirtySections: Set<ExactString> = []
    /// Whether a section is gone from the store, by id, as far as asked.
    var gone: [ExactString: Bool] = [:]
    /// Whether a section's first mention in the log is its insertion (so it did not exist before), by id.
    var born: [ExactString: Bool] = [:]
    /// Removals from gone sections and insertions into born ones, which need no walking (so far: their items
    /// may turn out tracked).
    var skipped = 0

    var sectionPositions: [Int?] = []
    var sectionCount = 0
    var itemPlaces: [WalkPlace?] = []
    /// The tracked items of each section, sorted by their index there, so that a removal or an insertion
    /// finds its place by binary search and shifts only the items after it.
    var trackedBySection: [ExactString: [Int]] = [:]
    var itemCounts: [ExactString: Int] = [:]
    var oldSectionData: [ExactString: OldValue] = [:]
    var oldItemData: [ExactString: OldValue] = [:]

    /// Notes what a change touches; false for a change that cannot be walked back cheaply.
    mutating func collect(_ change: Change) -> Bool {
        switch change {
        case .sectionInserted(let id, _):
            mention(id, inserting: true)
            track(section: id)
        case .sectionRemoved(let id, _, _), .sectionMoved(let id, _, _):
            mention(id)
            track(section: id)
        case .sectionDataSet(let id, _):
            mention(id)
        case .itemInserted(let id, let section, _):
            mention(section)
            if born[ExactString(section)] == true {
                skipped += 1
            } else {
                track(item: id)
                dirtySections.insert(ExactString(section))
            }
        case .itemRemoved(let item, let section, _):
            mention(section)
            if isGone(section) {
                skipped += 1
            } else {
                track(item: item.id)
                dirtySections.insert(ExactString(section))
            }
        case .itemMoved(let id, let from, _, let to, _):
            mention(from)
            mention(to)
            track(item: id)
            dirtySections.insert(ExactString(from))
            dirtySections.insert(ExactString(to))
        case .itemDataSet(let id, _):
            if dataItems.insert(ExactString(id)).inserted { dataOnlyItems.append(id) }
        case .replaced:
            return false
        }
        return true
    }

    private mutating func mention(_ section: String, inserting: Bool = false) {
        if born[ExactString(section)] == nil { born[ExactString(section)] = inserting }
    }

    private mutating func isGone(_ section: String) -> Bool {
        if let known = gone[ExactString(section)] { return known }
        let answer = store.sectionIndex(of: section) == nil
        gone[ExactString(section)] = answer
        return answer
    }

    private mutating func track(section id: String) {
        guard sectionTracker[ExactString(id)] == nil else { return }
        sectionTracker[ExactString(id)] = sectionIDs.count
        sectionIDs.append(id)
    }

    private mutating func track(item id: String) {
        guard itemTracker[ExactString(id)] == nil else { return }
        itemTracker[ExactString(id)] = itemIDs.count
        itemIDs.append(id)
    }

    /// Reads the current positions of everything tracked.
    mutating func start() {
        sectionCount = store.sectionCount
        sectionPositions = sectionIDs.map { store.sectionIndex(of: $0) }
        itemPlaces = itemIDs.enumerated().map { tracked, id in
            guard let path = store.location(ofItem: id) else { return nil }
            let section = store.sectionID(at: path.section)
            trackedBySection[ExactString(section), default: []].append(tracked)
            return WalkPlace(section: section, index: path.item)
        }
        for section in Array(trackedBySection.keys) {
            trackedBySection[section]?.sort { itemPlaces[$0]!.index < itemPlaces[$1]!.index }
        }
        for id in dirtySections {
            itemCounts[id] = store.sectionIndex(of: id.string).map { store.itemCount(inSection: $0) } ?? 0
        }
    }

    /// Undoes one change on the tracked positions; run from the newest change to the oldest, so that what is
    /// recorded last for an element is its state in the old version.
    mutating func undo(_ change: Change) {
        switch change {
        case .sectionInserted(let id, let at):
            removeSection(id, at: at)
            oldSectionData[ExactString(id)] = .absent
        case .sectionRemoved(let id, let data, let at):
            insertSection(id, at: at)
            oldSectionData[ExactString(id)] = .present(data)
        case .sectionMoved(let id, let from, let to):
            removeSection(id, at: to)
            insertSection(id, at: from)
        case .sectionDataSet(let id, let old):
            oldSectionData[ExactString(id)] = .present(old)
        case .itemInserted(let id, let section, let at):
            guard itemTracker[ExactString(id)] != nil else { return }
            removeItem(id, from: section, at: at)
            oldItemData[ExactString(id)] = .absent
        case .itemRemoved(let item, let section, let at):
            guard itemTracker[ExactString(item.id)] != nil else { return }
            insertItem(item.id, into: section, at: at)
            oldItemData[ExactString(item.id)] = .present(item.data)
        case .itemMoved(let id, let from, let fromIndex, let to, let toIndex):
            removeItem(id, from: to, at: toIndex)
            insertItem(id, into: from, at: fromIndex)
        case .itemDataSet(let id, let old):
            oldItemData[ExactString(id)] = .present(old)
        case .replaced:
            preconditionFailure("a replaced change cannot be walked")
        }
    }

    private mutating func removeSection(_ id: String, at index: Int) {
        for tracked in sectionPositions.indices {
            if let position = sectionPositions[tracked], position > index { sectionPositions[tracked] = position - 1 }
        }
        sectionPositions[sectionTracker[ExactString(id)]!] = nil
        sectionCount -= 1
    }

    private mutating func insertSection(_ id: String, at index: Int) {
        for tracked in sectionPositions.indices {
            if let position = sectionPositions[tracked], position >= index { sectionPositions[tracked] = position + 1 }
        }
        sectionPositions[sectionTracker[ExactString(id)]!] = index
        sectionCount += 1
    }

    /// - Complexity: O(log t) to find the place among the t tracked items of the section, plus the items after it.
    private mutating func removeItem(_ id: String, from section: String, at index: Int) {
        let removed = itemTracker[ExactString(id)]!
        var members = trackedBySection.removeValue(forKey: ExactString(section)) ?? []
        let position = firstMember(of: members, atOrAfter: index)
        if position < members.count, members[position] == removed {
            members.remove(at: position)
        } else if let elsewhere = members.firstIndex(of: removed) {
            members.remove(at: elsewhere)
        }
        for tracked in members[firstMember(of: members, atOrAfter: index + 1)...] { itemPlaces[tracked]!.index -= 1 }
        trackedBySection[ExactString(section)] = members
        itemPlaces[removed] = nil
        itemCounts[ExactString(section), default: 0] -= 1
    }

    /// - Complexity: O(log t) to find the place among the t tracked items of the section, plus the items after it.
    private mutating func insertItem(_ id: String, into section: String, at index: Int) {
        let inserted = itemTracker[ExactString(id)]!
        var members = trackedBySection.removeValue(forKey: ExactString(section)) ?? []
        let position = firstMember(of: members, atOrAfter: index)
        for tracked in members[position...] { itemPlaces[tracked]!.index += 1 }
        members.insert(inserted, at: position)
        trackedBySection[ExactString(section)] = members
        itemPlaces[inserted] = WalkPlace(section: section, index: index)
        itemCounts[ExactString(section), default: 0] += 1
    }

    /// The position in `members` (sorted by index) of the first one whose index is `index` or more.
    private func firstMember(of members: [Int], atOrAfter index: Int) -> Int {
        var low = 0
        var high = members.count
        while low < high {
            let middle = low + (high - low) / 2
            if itemPlaces[members[middle]]!.index < index { low = middle + 1 } else { high = middle }
        }
        return low
    }

    func delta() -> Delta {
        var builder = Builder(store: store)
        var delta = Delta()
        delta.oldSectionCount = sectionCount
        for (tracked, id) in sectionIDs.enumerated() {
            let key = builder.key(id, in: &delta)
            guard sectionPositions[tracked] != nil || delta.sectionNewIndex[key] != nil else { continue }
            delta.sections.append(
                Delta.SectionEntry(key: key, old: sectionPositions[tracked], new: delta.sectionNewIndex[key]))
        }
        for (id, old) in oldSectionData {
            guard case .present(let data) = old, let index = store.sectionIndex(of: id.string) else { continue }
            if let tracked = sectionTracker[id], sectionPositions[tracked] == nil { continue }
            if store.sectionData(at: index) != data {
                delta.changedSectionData.append(builder.key(id.string, in: &delta))
            }
        }
        for (tracked, id) in itemIDs.enumerated() {
            let path = store.location(ofItem: id)
            let new = path.map {
                Delta.Place(section: builder.key(store.sectionID(at: $0.section), in: &delta), index: $0.item)
            }
            let old = itemPlaces[tracked].map {
                Delta.Place(section: builder.key($0.section, in: &delta), index: $0.index)
            }
            guard old != nil || new != nil else { continue }
            var changed = false
            if let path, old != nil, case .present(let data) = oldItemData[ExactString(id)] {
                changed = store.item(at: path).data != data
            }
            delta.addItem(id, old: old, new: new, structural: true, dataChanged: changed)
        }
        for id in dataOnlyItems where itemTracker[ExactString(id)] == nil {
            guard case .present(let data) = oldItemData[ExactString(id)], let path = store.location(ofItem: id),
                store.item(at: path).data != data
            else { continue }
            let new = Delta.Place(section: builder.key(store.sectionID(at: path.section), in: &delta), index: path.item)
            delta.addItem(id, old: nil, new: new, structural: false, dataChanged: true)
        }
        for (id, count) in itemCounts {
            guard let index = store.sectionIndex(of: id.string) else { continue }
            if let tracked = sectionTracker[id], sectionPositions[tracked] == nil { continue }
            delta.itemCounts[builder.key(id.string, in: &delta)] = (count, store.itemCount(inSection: index))
        }
        return delta
    }
}

/// Gives each section named in a delta a key, once, with its current index.
private struct Builder {
    let store: Store
    var keys: [ExactString: Int] = [:]

    mutating func key(_ id: String, in delta: inout Delta) -> Int {
        if let key = keys[ExactString(id)] { return key }
        let key = delta.addSection(id: id, newIndex: store.sectionIndex(of: id))
        keys[ExactString(id)] = key
        return key
    }
}
