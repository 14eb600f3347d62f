/// The content after a small source change: the `ContentChange` the index gives, turned into the edits of the
/// view's collection, committed as one version with the changeset of those edits.
///
/// The edits: remove the affected items that were shown, last first; remove the sections that go, last first;
/// insert the sections that appear, then the affected items that are shown, first first (every untouched item
/// is already in place, so each index is final); then set the data that changed in place.
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
        return collection.commit { editor in change.edit(&editor, sectionData: rules.sectionData) }
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
            // The same edits as below, without sorting; an item that stays is moved, then given its data: a log
            // `SingleChange` reads (a removal and an insertion would take the general route).
            let item = affected[0]
            switch (item.structural ? item.old : nil, item.new) {
            case (let old?, let new?):
                editor.moveItem(from: oldPath(old), to: newPath(new))
                editor.setItemData(item.data, at: newPath(new))
            case (let old?, nil):
                editor.removeItem(at: oldPath(old))
            case (nil, let new?) where item.structural:
                editor.insertItem(Item(id: item.id, data: item.data), at: newPath(new))
            case (nil, let new?):
                editor.setItemData(item.data, at: newPath(new))
            case (nil, nil):
                break
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
}
