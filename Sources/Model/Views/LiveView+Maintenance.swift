/// Incremental maintenance: one source item at a time, the index is updated and, when recording, the ops that
/// keep the content equal to the first `limit` members are appended to `ops`.
///
/// Each step keeps the content a prefix of the index (except for sections left empty, which stay until the end
/// of the change so that an item moving inside its section never deletes and re-creates it): removing a shown
/// item deletes it and shows the member that the limit now lets in; inserting one within the limit hides the
/// member it pushes out, then shows it. Showing a member inserts it at its rank minus the rank of its section's
/// first member, in a section inserted at its rank among the content's sections when missing. All positions
/// come from the two indices, O(log n) each.
extension LiveView {
    /// How many members the content shows.
    private var shownCount: Int { min(rules.limit, index.count) }

    /// Takes one source item to its new data (nil: gone from the source).
    mutating func update(id: String, data: JSONData?, recording: Bool) {
        let old = members[id]
        let new = data.flatMap { data in rules.placement(id: id, data: data).map { Member(placement: $0, data: data) } }
        if let old, let new, old.placement == new.placement {
            guard old.data != new.data else { return }
            members[id] = new
            if recording, index.rank(of: new.placement.key) < shownCount {
                ops.append(.updateItems([Item(id: id, data: new.data)]))
            }
            return
        }
        if let old { remove(id, old, recording: recording) }
        if let new { insert(id, new, recording: recording) }
    }

    private mutating func remove(_ id: String, _ member: Member, recording: Bool) {
        let shown = shownCount
        guard let rank = index.remove(member.placement.key) else {
            preconditionFailure("member \(id) is not in the view's index")
        }
        members[id] = nil
        guard recording, rank < shown else { return }
        ops.append(.deleteItems([.id(id)]))
        noteEmptied(member.placement.section)
        if index.count >= rules.limit {
            let entering = index[rules.limit - 1].id
            guard let member = members[entering] else { preconditionFailure("member \(entering) is missing") }
            show(entering, member, rank: rules.limit - 1)
        }
    }

    private mutating func insert(_ id: String, _ member: Member, recording: Bool) {
        members[id] = member
        let rank = index.insert(OrderedIndex.Element(key: member.placement.key, id: id))
        guard recording, rank < rules.limit else { return }
        if index.count > rules.limit {
            let pushed = index[rules.limit].id
            ops.append(.deleteItems([.id(pushed)]))
            if let section = members[pushed]?.placement.section { noteEmptied(section) }
        }
        show(id, member, rank: rank)
    }

    private mutating func noteEmptied(_ section: String) {
        if rules.sectionBy != nil { emptied.insert(section) }
    }

    /// Inserts a member into the content, where its rank says.
    private mutating func show(_ id: String, _ member: Member, rank: Int) {
        let section = member.placement.section
        let sectionKey: [UInt8]
        if let key = present[section] {
            sectionKey = key
        } else {
            sectionKey = member.placement.sectionKey
            let at = sections.insert(OrderedIndex.Element(key: sectionKey, id: section))
            present[section] = sectionKey
            ops.append(.insertSections(at: at, sections: [Section(id: section, data: rules.sectionData(section))]))
        }
        let at = ItemPosition(section: .id(section), index: rank - index.rank(of: sectionKey))
        ops.append(.insertItems(at: at, items: [Item(id: id, data: member.data)]))
    }

    /// Deletes the sections that lost items during the change and have none left.
    mutating func deleteEmptiedSections() {
        for section in emptied.sorted() {
            guard let key = present[section] else { continue }
            let first = index.rank(of: key)
            if first < shownCount, OrderKey.hasPrefix(index[first].key, key) { continue }
            ops.append(.deleteSections([.id(section)]))
            sections.remove(key)
            present[section] = nil
        }
        emptied = []
    }

    /// Rebuilds the members and the index from the source, and returns the content they give.
    ///
    /// The order keys are also copied into one flat buffer, and positions are sorted by their keys' first eight
    /// bytes, then by comparing in that buffer: a sort of arrays of arrays would retain and release every key it
    /// compares.
    /// - Complexity: O(n log n) for n source items.
    mutating func derive(from source: VersionedCollection?) -> [Section] {
        var shown: [Member] = []
        var ids: [String] = []
        var flat: [UInt8] = []
        var bounds: [Range<Int>] = []
        for section in source?.snapshot() ?? [] {
            for item in section.items {
                guard let placement = rules.placement(id: item.id, data: item.data) else { continue }
                bounds.append(flat.count..<(flat.count + placement.key.count))
                flat.append(contentsOf: placement.key)
                shown.append(Member(placement: placement, data: item.data))
                ids.append(item.id)
            }
        }
        var sorting = shown.indices.map { (head: OrderedIndex.head(of: shown[$0].placement.key), position: $0) }
        flat.withUnsafeBytes { flat in
            bounds.withUnsafeBufferPointer { bounds in
                sorting.sort { a, b in
                    guard a.head == b.head else { return a.head < b.head }
                    return OrderKey.less(
                        UnsafeRawBufferPointer(rebasing: flat[bounds[a.position]]),
                        UnsafeRawBufferPointer(rebasing: flat[bounds[b.position]]))
                }
            }
        }
        let order = sorting.map(\.position)
        members = Dictionary(minimumCapacity: shown.count)
        for (member, id) in zip(shown, ids) { members[id] = member }
        index = OrderedIndex(sorted: order.map { OrderedIndex.Element(key: shown[$0].placement.key, id: ids[$0]) })
        return group(order.prefix(shownCount).lazy.map { (ids[$0], shown[$0]) })
    }

    /// The content the index gives (the first `limit` members in their sections), after which the section
    /// index is reset to it.
    /// - Complexity: O(m) for the m members shown.
    mutating func materialize() -> [Section] {
        let members = self.members
        let shown = index.elements.prefix(shownCount).map { element in
            guard let member = members[element.id] else { preconditionFailure("member \(element.id) is missing") }
            return (element.id, member)
        }
        return group(shown)
    }

    /// The content of the members shown, in order, after which the section index is reset to it.
    private mutating func group(_ shown: some Sequence<(String, Member)>) -> [Section] {
        var content: [Section] = []
        var keys: [OrderedIndex.Element] = []
        for (id, member) in shown {
            let section = member.placement.section
            if content.last?.id != section {
                content.append(Section(id: section, data: rules.sectionData(section)))
                keys.append(OrderedIndex.Element(key: member.placement.sectionKey, id: section))
            }
            content[content.count - 1].items.append(Item(id: id, data: member.data))
        }
        if rules.sectionBy == nil, content.isEmpty {
            content = [Section(id: ViewRules.allSection)]
            keys = [OrderedIndex.Element(key: [], id: ViewRules.allSection)]
        }
        sections = OrderedIndex(sorted: keys)
        present = Dictionary(uniqueKeysWithValues: keys.map { ($0.id, $0.key) })
        emptied = []
        return content
    }
}
