import Model

/// An independent model of UIKit's `performBatchUpdates` (sharing no code with Model's diff): applies a
/// changeset's deleted/inserted/moved as ONE batch with UIKit's coordinate rules, then its `updated` entries,
/// and rejects what UIKit rejects or mishandles, plus rules 1 to 3 of `docs/changesets.md` and its sorting and id
/// rules (`#the-eight-arrays`).
public enum UIKitBatch {
    public struct Rejection: Error, CustomStringConvertible {
        public var description: String
    }

    public static func apply(_ changeset: Changeset, to old: [Section]) throws(Rejection) -> [Section] {
        let c = changeset
        func reject(_ why: String) throws(Rejection) -> Never { throw Rejection(description: why) }
        func sorted<T>(_ values: [T], _ name: String, _ less: (T, T) -> Bool) throws(Rejection) {
            for (a, b) in zip(values, values.dropFirst()) where !less(a, b) { try reject("\(name) not sorted") }
        }
        try sorted(c.sections.deleted.map(\.index), "section deletes", <)
        try sorted(c.sections.inserted.map(\.index), "section inserts", <)
        try sorted(c.sections.moved.map(\.from), "section moves", <)
        try sorted(c.sections.updated.map(\.index), "section updates", <)
        try sorted(c.items.deleted.map(\.at), "item deletes", <)
        try sorted(c.items.inserted.map(\.at), "item inserts", <)
        try sorted(c.items.moved.map(\.from), "item moves", <)
        try sorted(c.items.updated.map(\.at), "item updates", <)

        // Sections, before the batch.
        var deletedSections = Set<Int>()
        var movedSources = [Int: Int]()
        for entry in c.sections.deleted {
            guard old.indices.contains(entry.index), old[entry.index].id.utf8.elementsEqual(entry.id.utf8) else {
                try reject("bad section delete \(entry)")
            }
            deletedSections.insert(entry.index)
        }
        for move in c.sections.moved {
            guard old.indices.contains(move.from), old[move.from].id.utf8.elementsEqual(move.id.utf8) else {
                try reject("bad move \(move)")
            }
            guard !deletedSections.contains(move.from) else { try reject("section \(move.from) deleted and moved") }
            movedSources[move.from] = move.to
        }
        // Sections, after the batch.
        let newCount = old.count - deletedSections.count + c.sections.inserted.count
        var slots = [Section?](repeating: nil, count: max(newCount, 0))
        var insertedSections = Set<Int>()
        var movedDestinations = Set<Int>()
        for entry in c.sections.inserted {
            guard slots.indices.contains(entry.index), slots[entry.index] == nil else {
                try reject("bad section insert at \(entry.index)")
            }
            slots[entry.index] = entry.section
            insertedSections.insert(entry.index)
        }
        for move in c.sections.moved {
            guard slots.indices.contains(move.to), slots[move.to] == nil else { try reject("bad move to \(move.to)") }
            slots[move.to] = old[move.from]
            movedDestinations.insert(move.to)
        }
        var newIndexOfOld = [Int: Int]()
        var free = slots.indices.filter { slots[$0] == nil }.makeIterator()
        for (index, section) in old.enumerated() {
            if deletedSections.contains(index) { continue }
            if let to = movedSources[index] {
                newIndexOfOld[index] = to
                continue
            }
            guard let slot = free.next() else { try reject("section counts do not add up") }
            slots[slot] = section
            newIndexOfOld[index] = slot
        }
        guard free.next() == nil else { try reject("section counts do not add up") }
        var result = slots.map { $0! }

        // Items: sources in live old sections, destinations in live new sections.
        func checkSource(_ path: ItemPath, _ id: String) throws(Rejection) {
            guard old.indices.contains(path.section), !deletedSections.contains(path.section),
                movedSources[path.section] == nil
            else { try reject("item source \(path) in a deleted or moved section") }
            guard old[path.section].items.indices.contains(path.item),
                old[path.section].items[path.item].id.utf8.elementsEqual(id.utf8)
            else { try reject("bad item source \(path) for \(id)") }
        }
        func checkDestination(_ path: ItemPath) throws(Rejection) {
            guard result.indices.contains(path.section), !insertedSections.contains(path.section),
                !movedDestinations.contains(path.section)
            else { try reject("item destination \(path) in an inserted or moved section") }
        }
        var removed = Set<ItemPath>()
        for entry in c.items.deleted {
            try checkSource(entry.at, entry.id)
            guard removed.insert(entry.at).inserted else { try reject("item \(entry.at) deleted twice") }
        }
        for move in c.items.moved {
            try checkSource(move.from, move.id)
            guard removed.insert(move.from).inserted else { try reject("item \(move.from) deleted and moved") }
        }
        var placed = [ItemPath: Item]()
        for entry in c.items.inserted {
            try checkDestination(entry.at)
            guard placed.updateValue(entry.item, forKey: entry.at) == nil else {
                try reject("two items at \(entry.at)")
            }
        }
        for move in c.items.moved {
            try checkDestination(move.to)
            let item = old[move.from.section].items[move.from.item]
            guard placed.updateValue(item, forKey: move.to) == nil else { try reject("two items at \(move.to)") }
        }
        let touchedNew = Set(placed.keys.map(\.section))
        let touchedOld = Set(removed.map(\.section))
        for (oldIndex, newIndex) in newIndexOfOld where touchedOld.contains(oldIndex) || touchedNew.contains(newIndex) {
            let kept = old[oldIndex].items.indices.filter { !removed.contains(ItemPath(section: oldIndex, item: $0)) }
            let arrivals = placed.filter { $0.key.section == newIndex }
            var items = [Item?](repeating: nil, count: kept.count + arrivals.count)
            for (path, item) in arrivals {
                guard items.indices.contains(path.item) else { try reject("item destination \(path) out of range") }
                items[path.item] = item
            }
            var rest = kept.makeIterator()
            for i in items.indices where items[i] == nil { items[i] = old[oldIndex].items[rest.next()!] }
            result[newIndex].items = items.map { $0! }
        }
        let orphans = placed.keys.filter { path in !newIndexOfOld.values.contains(path.section) }
        guard orphans.isEmpty else { try reject("items placed in no live section: \(orphans)") }

        // Updates, after the batch.
        for update in c.sections.updated {
            guard result.indices.contains(update.index), !insertedSections.contains(update.index),
                result[update.index].id.utf8.elementsEqual(update.id.utf8)
            else { try reject("bad section update \(update)") }
            result[update.index].data = update.data
        }
        for update in c.items.updated {
            let path = update.at
            guard result.indices.contains(path.section), !insertedSections.contains(path.section),
                result[path.section].items.indices.contains(path.item),
                result[path.section].items[path.item].id.utf8.elementsEqual(update.item.id.utf8),
                placed[path] == nil
                    || c.items.moved.contains(where: { $0.to == path })
            else { try reject("bad item update \(update.at)") }
            result[path.section].items[path.item].data = update.item.data
        }
        return result
    }
}
