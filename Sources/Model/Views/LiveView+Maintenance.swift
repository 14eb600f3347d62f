/// Maintenance of the members and the index: one source item at a time (`update`), or all of them from the
/// source (`derive`); the content they give (`materialize`, `group`). The content itself changes in
/// `LiveView+Commit.swift`, from what `update` reports.
extension LiveView {
    /// How many members the content shows.
    var shownCount: Int { min(rules.limit, index.count) }

    /// What `update` did to one item.
    enum Update {
        /// Nothing the view shows or orders changed.
        case none
        /// The item's data changed, not its place in the index.
        case data(id: String, key: [UInt8])
        /// The item entered the index, left it or moved in it.
        case moved(Touch)
    }

    /// Takes one source item to its new data (nil: gone from the source), in the members and the index.
    /// - Complexity: O(log n), plus the data's size.
    mutating func update(id: String, data: JSONData?) -> Update {
        let old = members[id]
        let new = data.flatMap { data in rules.placement(id: id, data: data).map { Member(placement: $0, data: data) } }
        if let old, let new, old.placement == new.placement {
            guard old.data != new.data else { return .none }
            members[id] = new
            return .data(id: id, key: new.placement.key)
        }
        guard old != nil || new != nil else { return .none }
        var touch = Touch(id: id, old: old, new: new)
        if let old {
            guard let rank = index.remove(old.placement.key) else {
                preconditionFailure("member \(id) is not in the view's index")
            }
            touch.oldRank = rank
        }
        if let new {
            members[id] = new
            touch.newRank = index.insert(OrderedIndex.Element(key: new.placement.key, id: id))
        } else {
            members[id] = nil
        }
        return .moved(touch)
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
        return content
    }
}
