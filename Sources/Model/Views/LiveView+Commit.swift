/// The content after a small source change: the `ContentChange` the index gives, turned into the edits of the
/// view's collection and into its changeset, committed together as one version.
///
/// The edits: remove the affected items that were shown, last first; remove the sections that go, last first;
/// insert the sections that appear, then the affected items that are shown, first first (every untouched item
/// is already in place, so each index is final); then set the data that changed in place. The changeset
/// (`docs/changesets.md`): the sections that go and appear; an item moving between two surviving sections is a
/// move, one coming from a section that goes (or from nowhere) into a surviving one an insert, one leaving a
/// surviving section for one that appears (or for nowhere) a delete; inside a surviving section the items
/// `ContentChange` marks move; every surviving item whose data changed is an update. No section ever moves (they
/// are sorted by key), so rule 3 never has to rebuild one.
extension LiveView {
    /// A member whose order key changed: it entered the index, left it or moved in it.
    struct Touch {
        var id: String
        var old: Member?
        var new: Member?
        /// The rank `old` had when it was removed from the index, and the one `new` got when inserted: its ranks
        /// in the old index and in the new one when it is the only touch of the change.
        var oldRank = 0
        var newRank = 0
    }

    /// Brings the content in line with the index after `update`s, and commits it as one version.
    /// - Returns: the changeset, or nil when the content did not change.
    /// - Complexity: O(k log n) for k affected items, plus what the changeset lists.
    mutating func commit(_ touches: [Touch], _ dataChanges: [(id: String, key: [UInt8])]) -> Changeset? {
        let change = ContentChange(self, touches: touches, dataChanges: dataChanges)
        guard !change.affected.isEmpty else { return nil }
        for section in change.sections where section.wasShown != section.isShown {
            if section.wasShown {
                sections.remove(section.key)
                present[ExactString(section.id)] = nil
            } else {
                sections.insert(OrderedIndex.Element(key: section.key, id: section.id))
                present[ExactString(section.id)] = section.key
            }
        }
        let rules = self.rules
        return collection.commit(
            { editor in change.edit(&editor, sectionData: rules.sectionData) },
            changes: { store in change.changes(in: store) })
    }
}

extension ContentChange {
    private func oldPath(_ place: Place) -> ItemPath {
        ItemPath(section: sections[place.section].oldIndex, item: place.index)
    }

    private func newPath(_ place: Place) -> ItemPath {
        ItemPath(section: sections[place.section].newIndex, item: place.index)
    }

    /// Takes the old content to the new one.
    func edit(_ editor: inout Editor, sectionData: (String) -> JSONData) {
        if affected.count == 1, sections.allSatisfy({ $0.wasShown == $0.isShown }) {
            // The same edits as below, without sorting.
            let item = affected[0]
            if item.structural, let old = item.old { editor.removeItem(at: oldPath(old)) }
            if let new = item.new {
                if item.structural {
                    editor.insertItem(Item(id: item.id, data: item.data), at: newPath(new))
                } else {
                    editor.setItemData(item.data, at: newPath(new))
                }
            }
            return
        }
        let moving = affected.filter(\.structural)
        for path in moving.compactMap({ $0.old.map(oldPath) }).sorted(by: >) { editor.removeItem(at: path) }
        for section in sections.filter({ $0.wasShown && !$0.isShown }).sorted(by: { $0.oldIndex > $1.oldIndex }) {
            editor.removeSection(at: section.oldIndex)
        }
        for section in sections.filter({ !$0.wasShown && $0.isShown }).sorted(by: { $0.newIndex < $1.newIndex }) {
            editor.insertSection(id: section.id, data: sectionData(section.id), at: section.newIndex)
        }
        let arriving = moving.compactMap { item in item.new.map { (newPath($0), Item(id: item.id, data: item.data)) } }
        for (path, item) in arriving.sorted(by: { $0.0 < $1.0 }) { editor.insertItem(item, at: path) }
        for item in affected where !item.structural {
            if let new = item.new { editor.setItemData(item.data, at: newPath(new)) }
        }
    }

    /// The changeset's arrays, read from the new content where they quote it.
    func changes(in store: Store) -> (SectionChanges, ItemChanges) {
        var sectionChanges = SectionChanges()
        for section in sections where section.wasShown != section.isShown {
            if section.wasShown {
                sectionChanges.deleted.append(SectionDeletion(index: section.oldIndex, id: section.id))
            } else {
                sectionChanges.inserted.append(
                    SectionInsertion(index: section.newIndex, section: store.section(at: section.newIndex)))
            }
        }
        var items = ItemChanges()
        for item in affected {
            let fromLive = item.old.map { sections[$0.section].isLive } ?? false
            let toLive = item.new.map { sections[$0.section].isLive } ?? false
            if let old = item.old, let new = item.new, fromLive, toLive {
                if old.section != new.section || item.moves {
                    items.moved.append(ItemMove(from: oldPath(old), to: newPath(new), id: item.id))
                }
            } else if let old = item.old, fromLive {
                items.deleted.append(ItemDeletion(at: oldPath(old), id: item.id))
            } else if let new = item.new, toLive, item.structural {
                items.inserted.append(ItemInsertion(at: newPath(new), item: Item(id: item.id, data: item.data)))
                continue
            }
            if item.dataChanged, let new = item.new, toLive {
                items.updated.append(ItemUpdate(at: newPath(new), item: Item(id: item.id, data: item.data)))
            }
        }
        for move in runMoves {
            for offset in 0..<move.run.count {
                let to = ItemPath(section: sections[move.section].newIndex, item: move.run.new + offset)
                let from = ItemPath(section: sections[move.section].oldIndex, item: move.run.old + offset)
                items.moved.append(ItemMove(from: from, to: to, id: store.item(at: to).id))
            }
        }
        sectionChanges.sortByFirstIndex()
        items.sortByFirstIndex()
        return (sectionChanges, items)
    }
}
