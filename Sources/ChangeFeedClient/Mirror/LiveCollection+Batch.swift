import Model

extension LiveCollection {
    /// Applies a changeset's batch (deleted, inserted and moved of sections and items at once, with UIKit's
    /// coordinates), then its updates, checking every entry against the mirror (`docs/changesets.md`: the
    /// coordinates, rules 2 and 3, ids at their places). Sections are rebuilt (O(sections)); items are removed in
    /// ascending order of their before-batch paths (each shifted by the removals before it in its section), then
    /// inserted in ascending order of their after-batch paths, which is exactly UIKit's batch.
    /// - Throws: `FeedError.invalidChangeset`; the mirror may then be half changed (the caller puts it back).
    mutating func applyBatch(_ changeset: Changeset) throws(FeedError) {
        let (oldToNew, roles) = try applySectionBatch(changeset.sections)
        var movedItems = [Item?](repeating: nil, count: changeset.items.moved.count)
        try removeItems(changeset.items, oldToNew: oldToNew, movedItems: &movedItems)
        for entry in changeset.sections.inserted {
            for item in entry.section.items where !itemIDs.insert(ExactString(item.id)).inserted {
                throw FeedError.invalidChangeset("inserted item id \(item.id.debugDescription) is already there")
            }
        }
        try insertItems(changeset.items, roles: roles, movedItems: movedItems)
        try applyUpdates(changeset, roles: roles)
    }

    /// What a section index after the batch holds.
    enum SectionRole: UInt8 {
        case surviving, inserted, movedHere
    }

    /// Puts the sections as they are after the batch (no other reference to their items is kept, so that the
    /// item batch changes them in place); returns for each section index before the batch the index after it
    /// (nil when the section was deleted or moved: items may not leave those), and each new index's role.
    private mutating func applySectionBatch(_ changes: SectionChanges) throws(FeedError) -> (
        oldToNew: [Int?], roles: [SectionRole]
    ) {
        let oldCount = mirror.count
        var deleted = [Bool](repeating: false, count: oldCount)
        var moveTarget = [Int?](repeating: nil, count: oldCount)
        for entry in changes.deleted {
            guard entry.index < oldCount, mirror[entry.index].id.hasSameBytes(as: entry.id) else {
                throw FeedError.invalidChangeset("no section \(entry.id.debugDescription) at \(entry.index) to delete")
            }
            deleted[entry.index] = true
        }
        for move in changes.moved {
            guard move.from < oldCount, mirror[move.from].id.hasSameBytes(as: move.id) else {
                throw FeedError.invalidChangeset("no section \(move.id.debugDescription) at \(move.from) to move")
            }
            moveTarget[move.from] = move.to
        }
        let newCount = oldCount - changes.deleted.count + changes.inserted.count
        guard newCount >= 0 else { throw FeedError.invalidChangeset("more sections deleted than there are") }
        var roles = [SectionRole](repeating: .surviving, count: newCount)
        var slots = [MirrorSection?](repeating: nil, count: newCount)
        for entry in changes.inserted {
            guard entry.index < newCount else {
                throw FeedError.invalidChangeset("section inserted at \(entry.index) of \(newCount)")
            }
            roles[entry.index] = .inserted
            slots[entry.index] = MirrorSection(
                id: entry.section.id, data: entry.section.data, items: ItemList(entry.section.items))
        }
        for move in changes.moved {
            guard move.to < newCount else {
                throw FeedError.invalidChangeset("section moved to \(move.to) of \(newCount)")
            }
            roles[move.to] = .movedHere
        }
        var old = mirror
        mirror = []
        var oldToNew = [Int?](repeating: nil, count: oldCount)
        var free = 0
        for index in 0..<oldCount {
            if deleted[index] {
                for chunk in old[index].items.chunks { for item in chunk { itemIDs.remove(ExactString(item.id)) } }
                continue
            }
            let target: Int
            if let to = moveTarget[index] {
                target = to
            } else {
                while free < newCount && roles[free] != .surviving { free += 1 }
                guard free < newCount else { throw FeedError.invalidChangeset("section counts do not add up") }
                target = free
                free += 1
                oldToNew[index] = target
            }
            slots[target] = old[index]
            old[index].items = .empty
        }
        var sections: [MirrorSection] = []
        sections.reserveCapacity(newCount)
        var sectionIDs = Set<ExactString>(minimumCapacity: newCount)
        for slot in slots {
            guard let section = slot else { throw FeedError.invalidChangeset("section counts do not add up") }
            guard sectionIDs.insert(ExactString(section.id)).inserted else {
                throw FeedError.invalidChangeset("section id \(section.id.debugDescription) appears twice")
            }
            sections.append(section)
        }
        slots = []
        mirror = sections
        return (oldToNew, roles)
    }

    /// Removes deleted items and the sources of moves, keeping the moved items by their move's position.
    private mutating func removeItems(
        _ changes: ItemChanges, oldToNew: [Int?], movedItems: inout [Item?]
    ) throws(FeedError) {
        // Both lists are sorted by their before-batch paths (`ChangesetShape`): merged, not sorted.
        let removals = Self.merged(changes.deleted.map(\.at), changes.moved.map(\.from))
        var start = 0
        while start < removals.count {
            let oldSection = removals[start].at.section
            guard oldSection < oldToNew.count, let section = oldToNew[oldSection] else {
                throw FeedError.invalidChangeset(
                    "item taken from section \(oldSection), which is missing, deleted or moved (rule 3)")
            }
            var cursor = ItemList.Cursor()
            var removed = 0
            while start < removals.count, removals[start].at.section == oldSection {
                let (at, source) = removals[start]
                let id = source >= 0 ? changes.deleted[source].id : changes.moved[~source].id
                let index = at.item - removed
                guard index < mirror[section].items.count else {
                    throw FeedError.invalidChangeset("no item at \(at)")
                }
                let item = mirror[section].items.remove(at: index, from: &cursor)
                guard item.id.hasSameBytes(as: id) else {
                    throw FeedError.invalidChangeset(
                        "item at \(at) is \(item.id.debugDescription), not \(id.debugDescription)")
                }
                if source < 0 { movedItems[~source] = item } else { itemIDs.remove(ExactString(item.id)) }
                removed += 1
                start += 1
            }
        }
    }

    /// Inserts inserted items and the destinations of moves.
    private mutating func insertItems(
        _ changes: ItemChanges, roles: [SectionRole], movedItems: [Item?]
    ) throws(FeedError) {
        for entry in changes.inserted where !itemIDs.insert(ExactString(entry.item.id)).inserted {
            throw FeedError.invalidChangeset("inserted item id \(entry.item.id.debugDescription) is already there")
        }
        // Insertions are sorted by their after-batch paths; move destinations are sorted here, then merged.
        let moves = changes.moved.indices.sorted { changes.moved[$0].to < changes.moved[$1].to }
        let merged = Self.merged(changes.inserted.map(\.at), moves.map { changes.moved[$0].to })
        var arrivals: [(at: ItemPath, item: Item)] = []
        arrivals.reserveCapacity(merged.count)
        for (at, source) in merged {
            if source >= 0 {
                arrivals.append((at, changes.inserted[source].item))
            } else {
                guard let item = movedItems[moves[~source]] else { throw FeedError.invalidChangeset("a move lost") }
                arrivals.append((at, item))
            }
        }
        var start = 0
        while start < arrivals.count {
            let section = arrivals[start].at.section
            guard section < roles.count, roles[section] == .surviving else {
                throw FeedError.invalidChangeset(
                    "item placed in section \(section), which is missing, inserted or moved (rule 3)")
            }
            var cursor = ItemList.Cursor()
            while start < arrivals.count, arrivals[start].at.section == section {
                let entry = arrivals[start]
                guard entry.at.item <= mirror[section].items.count else {
                    throw FeedError.invalidChangeset("item placed at \(entry.at), out of range")
                }
                mirror[section].items.insert(entry.item, at: entry.at.item, from: &cursor)
                start += 1
            }
        }
        for section in mirror.indices { mirror[section].items.dropEmptyChunks() }
    }

    /// Applies `updated` of sections and items, at their after-batch coordinates.
    private mutating func applyUpdates(_ changeset: Changeset, roles: [SectionRole]) throws(FeedError) {
        for update in changeset.sections.updated {
            guard update.index < mirror.count, roles[update.index] != .inserted,
                mirror[update.index].id.hasSameBytes(as: update.id)
            else {
                throw FeedError.invalidChangeset(
                    "no section \(update.id.debugDescription) at \(update.index) to update")
            }
            mirror[update.index].data = update.data
        }
        var cursor = ItemList.Cursor()
        var cursorSection = -1
        for update in changeset.items.updated {
            let path = update.at
            guard path.section < mirror.count, path.item < mirror[path.section].items.count else {
                throw FeedError.invalidChangeset("no item at \(path) to update")
            }
            if path.section != cursorSection {
                cursor = ItemList.Cursor()
                cursorSection = path.section
            }
            guard mirror[path.section].items.item(at: path.item, from: &cursor).id.hasSameBytes(as: update.item.id)
            else {
                throw FeedError.invalidChangeset("item at \(path) is not \(update.item.id.debugDescription)")
            }
            mirror[path.section].items.setData(update.item.data, at: path.item, from: &cursor)
        }
    }

    /// Two lists of paths, each sorted, merged into one sorted list of each path with its source: its index in
    /// `first`, or the bitwise complement (`~`) of its index in `second`.
    /// - Complexity: O(n).
    static func merged(_ first: [ItemPath], _ second: [ItemPath]) -> [(at: ItemPath, source: Int)] {
        var result: [(at: ItemPath, source: Int)] = []
        result.reserveCapacity(first.count + second.count)
        var i = 0
        var j = 0
        while i < first.count || j < second.count {
            if j == second.count || (i < first.count && first[i] < second[j]) {
                result.append((first[i], i))
                i += 1
            } else {
                result.append((second[j], ~j))
                j += 1
            }
        }
        return result
    }
}
