/// What a small source change does to a view's content, found from the index rather than by ops and a walked
/// log: the items whose place (or data) in the content changed, with their places before and after, from which
/// the edits of the content follow directly.
///
/// `LiveView.update` leaves the index holding the new members and reports each member whose key changed (a
/// `Touch`: it entered the index, left it or moved in it) and each whose data alone changed. The old index is
/// the new one less the touched members' new keys plus their old keys, so the old rank of any key is its rank
/// in the index corrected by the touched keys below it (`Shift`). The old content is the first `limit` members
/// of the old index, the new content the first `limit` of the new one, in their sections; an item's index in
/// its section is its rank less the rank of the section's key (which sorts just before the section's members).
///
/// The affected items are the touched members shown before or after and, under a limit, the untouched members
/// that crossed it: their ranks moved by at most the number of touches, so they lie within that distance of
/// the limit. Sections never move (they are sorted by key), and one appears or goes only with an affected item.
/// - Complexity: O(k log n) for k affected items.
struct ContentChange {
    /// Where an item is in the content: its section (a position in `sections`) and its index there.
    struct Place {
        var section: Int
        var index: Int
    }

    /// An item whose place or data in the content changed.
    struct Affected {
        var id: String
        /// Its data now.
        var data: JSONData
        var old: Place?
        var new: Place?
        /// False for an item that only changed its data, in place (then `old` is nil).
        var structural: Bool
    }

    /// A section that holds an affected item before or after.
    struct SectionState {
        var id: String
        var key: [UInt8]
        var wasShown: Bool
        var isShown: Bool
        /// How many members sort before the section's key, in the old index and in the new one.
        var oldRank: Int
        var newRank: Int
        var oldIndex = 0
        var newIndex = 0
    }

    /// Old ranks from new ones: the touched members' old keys (gone from the index) and new keys, each sorted.
    struct Shift {
        private var removed: [[UInt8]]
        private var added: [[UInt8]]

        init(_ touches: [LiveView.Touch]) {
            removed = touches.compactMap { $0.old?.placement.key }
            added = touches.compactMap { $0.new?.placement.key }
            if removed.count > 1 { removed.sort { OrderKey.less($0, $1) } }
            if added.count > 1 { added.sort { OrderKey.less($0, $1) } }
        }

        /// How many old members sort before `key`, which `newRank` new members sort before.
        func oldRank(_ key: [UInt8], newRank: Int) -> Int {
            newRank + Shift.count(removed, below: key) - Shift.count(added, below: key)
        }

        /// Whether `key` is a touched member's new key.
        func isAdded(_ key: [UInt8]) -> Bool {
            let position = Shift.count(added, below: key)
            return position < added.count && added[position] == key
        }

        /// How many of the sorted `keys` sort before `key`.
        static func count(_ keys: [[UInt8]], below key: [UInt8]) -> Int {
            var low = 0
            var high = keys.count
            while low < high {
                let middle = (low + high) / 2
                if OrderKey.less(keys[middle], key) { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    private(set) var sections: [SectionState] = []
    private(set) var affected: [Affected] = []
    /// Positions in `sections` by id, once they are too many to search.
    private var sectionPositions: [ExactString: Int]?

    /// The change from the old content to the one the view's index now gives.
    /// - Parameters:
    ///   - touches: the members whose key changed, each once.
    ///   - dataChanges: the members whose data alone changed, with their keys.
    init(_ view: borrowing LiveView, touches: [LiveView.Touch], dataChanges: [(id: String, key: [UInt8])]) {
        let index = view.index
        let limit = view.rules.limit
        let shift = Shift(touches)
        sections.reserveCapacity(2 * touches.count + dataChanges.count)
        affected.reserveCapacity(2 * touches.count + dataChanges.count)
        // A lone touch's ranks are those `update` saw: removing from the old index, inserting into the new one.
        let alone = touches.count == 1
        for touch in touches {
            var old: Place?
            var new: Place?
            if let member = touch.new {
                let rank = alone ? touch.newRank : index.rank(of: member.placement.key)
                if rank < limit {
                    let section = section(of: member.placement, view, shift, isShown: true)
                    new = Place(section: section, index: rank - sections[section].newRank)
                }
            }
            if let member = touch.old {
                let rank =
                    alone
                    ? touch.oldRank : shift.oldRank(member.placement.key, newRank: index.rank(of: member.placement.key))
                if rank < limit {
                    let section = section(of: member.placement, view, shift)
                    old = Place(section: section, index: rank - sections[section].oldRank)
                }
            }
            guard old != nil || new != nil, let data = touch.new?.data ?? touch.old?.data else { continue }
            affected.append(Affected(id: touch.id, data: data, old: old, new: new, structural: true))
        }
        if limit < index.count + touches.count, !touches.isEmpty {
            addCrossings(view, shift, from: max(0, limit - touches.count), to: min(index.count, limit + touches.count))
        }
        for (id, key) in dataChanges {
            let rank = index.rank(of: key)
            // Shown before too, or it crossed the limit and is inserted with its data.
            guard rank < limit, shift.oldRank(key, newRank: rank) < limit, let member = view.members[ExactString(id)]
            else {
                continue
            }
            let section = section(of: member.placement, view, shift)
            let new = Place(section: section, index: rank - sections[section].newRank)
            affected.append(Affected(id: id, data: member.data, old: nil, new: new, structural: false))
        }
        numberSections(view)
    }

    /// Adds the untouched members of new ranks `from..<to` that entered or left the first `limit`.
    private mutating func addCrossings(_ view: borrowing LiveView, _ shift: Shift, from: Int, to: Int) {
        let limit = view.rules.limit
        for rank in from..<to {
            let element = view.index[rank]
            guard !shift.isAdded(element.key) else { continue }
            let oldRank = shift.oldRank(element.key, newRank: rank)
            guard (oldRank < limit) != (rank < limit), let member = view.members[ExactString(element.id)] else {
                continue
            }
            let section = section(of: member.placement, view, shift)
            let place = Place(
                section: section, index: (rank < limit ? rank : oldRank) - sectionRank(section, rank < limit))
            affected.append(
                Affected(
                    id: element.id, data: member.data, old: rank < limit ? nil : place,
                    new: rank < limit ? place : nil, structural: true))
        }
    }

    private func sectionRank(_ section: Int, _ new: Bool) -> Int {
        new ? sections[section].newRank : sections[section].oldRank
    }

    /// The position in `sections` of the section of a member placed so, added when missing.
    /// - Parameter isShown: true when the new content is known to show the section (it shows that member).
    private mutating func section(
        of placement: ViewRules.Placement, _ view: borrowing LiveView, _ shift: Shift, isShown: Bool = false
    ) -> Int {
        if let sectionPositions {
            if let position = sectionPositions[ExactString(placement.section)] { return position }
        } else if let position = sections.firstIndex(where: { $0.id.hasSameBytes(as: placement.section) }) {
            return position
        }
        let index = view.index
        let wasShown = view.present[ExactString(placement.section)]
        let key = wasShown ?? placement.sectionKey
        let newRank = index.rank(of: key)
        let isShown =
            isShown || view.rules.sectionBy == nil
            || (newRank < min(view.rules.limit, index.count) && OrderKey.hasPrefix(index[newRank].key, key))
        sections.append(
            SectionState(
                id: placement.section, key: key, wasShown: wasShown != nil, isShown: isShown,
                oldRank: shift.oldRank(key, newRank: newRank), newRank: newRank))
        if sectionPositions != nil {
            sectionPositions?[ExactString(placement.section)] = sections.count - 1
        } else if sections.count > 16 {
            sectionPositions = Dictionary(
                uniqueKeysWithValues: sections.enumerated().map { (ExactString($0.element.id), $0.offset) })
        }
        return sections.count - 1
    }

    /// Gives each section its index in the old content and in the new one: its rank among the sections shown
    /// before (the view's section index, not yet updated), corrected by the sections that go or appear.
    private mutating func numberSections(_ view: borrowing LiveView) {
        var gone: [[UInt8]] = []
        var appearing: [[UInt8]] = []
        for section in sections where section.wasShown != section.isShown {
            if section.wasShown { gone.append(section.key) } else { appearing.append(section.key) }
        }
        gone.sort { OrderKey.less($0, $1) }
        appearing.sort { OrderKey.less($0, $1) }
        for position in sections.indices {
            let key = sections[position].key
            let rank = view.sections.rank(of: key)
            sections[position].oldIndex = rank
            sections[position].newIndex =
                rank - Shift.count(gone, below: key) + Shift.count(appearing, below: key)
        }
    }
}
