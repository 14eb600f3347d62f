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
        let new = data.flatMap { data in rules.placement(id: id, data: data).map { Member(placement: $0, data: data) } }
        // One lookup of the id both reads the old member and stores the new one.
        let old: Member?
        if let new {
            old = members.updateValue(new, forKey: ExactString(id))
        } else {
            old = members.removeValue(forKey: ExactString(id))
        }
        if let old, let new, old.placement == new.placement {
            return old.data == new.data ? .none : .data(id: id, key: new.placement.key)
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
            touch.newRank = index.insert(OrderedIndex.Element(key: new.placement.key, id: id))
        }
        return .moved(touch)
    }

    /// Rebuilds the members and the index from the source, and hands the content they give to `commit`, which
    /// puts it into the view's collection.
    ///
    /// The order keys are also copied into one flat buffer, and positions are sorted by it (`sortByKey`): a sort
    /// of arrays of arrays would retain and release every key it compares. Members are moved, not copied, into
    /// the dictionary, and the content takes only their data: in a large view every copy retains a key and a
    /// data buffer that are no longer in the processor's cache, which costs more than the sorting does. The
    /// steps that do not depend on each other run at the same time for a large view (`concurrently`): the old
    /// members and index are freed while the keys are sorted and the new index built, and the members'
    /// dictionary is built while `commit` runs (for a new definition, the full diff and the collection's new
    /// store). Steps that retain the same objects (freeing the old members and building the content both touch
    /// the items' data) are not paired: two cores writing one reference count slow each other down more than
    /// they gain.
    /// - Parameter gates: an index of the source by the fields gates test: when it covers the definition's gate,
    ///   only the items that pass the gate are evaluated.
    /// - Complexity: O(n log n) for n source items.
    mutating func derive(
        from source: VersionedCollection?, gates: GateIndex? = nil,
        commit: (inout VersionedCollection, [Section]) -> Void
    ) {
        let candidates = definition.gate.flatMap { gate in gates?.slots(passing: gate) }
        let passed = LiveView.filter(source?.store, by: rules, candidates: candidates)
        defer {
            passed.ids.deinitialize(count: passed.count)
            passed.ids.deallocate()
            passed.members.deallocate()
        }
        let large = passed.count >= LiveView.partedFilterMinimum
        var retired = (members: members, index: index)
        members = [:]
        index = OrderedIndex()
        var order: [Int] = []
        // A new view has nothing old to free: the hop to a second thread would cost without gaining. A copy of a
        // view, redefined, still shares its old state with the original, which frees it when it goes: the hop
        // then frees nothing either.
        concurrently(&retired, &index, if: large && !retired.members.isEmpty) { retired in
            retired = ([:], OrderedIndex())
        } _: { index in
            order = LiveView.sortByKey(passed.flat, passed.bounds)
            index = OrderedIndex(
                sorted: order.lazy.map {
                    OrderedIndex.Element(key: passed.members[$0].placement.key, id: passed.ids[$0])
                })
        }
        let content = group(count: shownCount) { k in
            (passed.ids[order[k]], passed.members[order[k]].placement.section, passed.members[order[k]].data)
        } sectionKey: { k in
            passed.members[order[k]].placement.sectionKey
        }
        concurrently(&members, &collection, if: large) { members in
            members = Dictionary(minimumCapacity: passed.count)
            for position in 0..<passed.count {
                members[ExactString(passed.ids[position])] = (passed.members + position).move()
            }
        } _: { collection in
            commit(&collection, content)
        }
    }

    /// The positions of `bounds` in the order of their keys in `flat`.
    ///
    /// Positions are sorted by eight bytes of their keys at a time, each run of equal bytes by the next eight,
    /// until the run's keys differ (a radix sort, most significant digit first); a run of keys that still tie
    /// after their longest key's end is sorted by comparing keys. Keys that share long prefixes (a section and a
    /// first sort key) are each read a few times, not at every comparison of a sort.
    /// - Complexity: O(n log n) comparisons of integers, plus reading each key's bytes once for every eight it
    ///   shares with a neighbour.
    private static func sortByKey(_ flat: [UInt8], _ bounds: [Range<Int>]) -> [Int] {
        flat.withUnsafeBytes { flat in
            bounds.withUnsafeBufferPointer { bounds in
                func digit(_ position: Int, _ depth: Int) -> UInt64 {
                    let range = bounds[position]
                    let start = range.lowerBound + depth
                    if start + 8 <= range.upperBound {
                        return UInt64(bigEndian: flat.loadUnaligned(fromByteOffset: start, as: UInt64.self))
                    }
                    var digit: UInt64 = 0
                    for at in start..<(start + 8) { digit = digit << 8 | UInt64(at < range.upperBound ? flat[at] : 0) }
                    return digit
                }
                var sorting = bounds.indices.map { (digit: digit($0, 0), position: $0) }
                sorting.sort { $0.digit < $1.digit }
                // Runs of equal digits still to sort, with the depth of their next digit.
                var runs: [(range: Range<Int>, depth: Int)] = []
                func pushRuns(in range: Range<Int>, depth: Int) {
                    var start = range.lowerBound
                    for end in (range.lowerBound + 1)...range.upperBound
                    where end == range.upperBound || sorting[end].digit != sorting[start].digit {
                        if end - start > 1 { runs.append((start..<end, depth)) }
                        start = end
                    }
                }
                if !sorting.isEmpty { pushRuns(in: sorting.indices, depth: 8) }
                while let (range, depth) = runs.popLast() {
                    if sorting[range].allSatisfy({ bounds[$0.position].count <= depth }) {
                        sorting[range].sort { a, b in
                            OrderKey.less(
                                UnsafeRawBufferPointer(rebasing: flat[bounds[a.position]]),
                                UnsafeRawBufferPointer(rebasing: flat[bounds[b.position]]))
                        }
                        continue
                    }
                    for at in range { sorting[at].digit = digit(sorting[at].position, depth) }
                    sorting[range].sort { $0.digit < $1.digit }
                    pushRuns(in: range, depth: depth + 8)
                }
                return sorting.map(\.position)
            }
        }
    }

    /// The content the index gives (the first `limit` members in their sections), after which the section
    /// index is reset to it.
    /// - Complexity: O(m) for the m members shown.
    mutating func materialize() -> [Section] {
        let members = self.members
        let shown = index.elements.prefix(shownCount).map { element in
            guard let member = members[ExactString(element.id)] else {
                preconditionFailure("member \(element.id) is missing")
            }
            return (element.id, member)
        }
        return group(count: shown.count) { k in
            (shown[k].0, shown[k].1.placement.section, shown[k].1.data)
        } sectionKey: { k in
            shown[k].1.placement.sectionKey
        }
    }

    /// The content of `count` members shown, in order (`member(k)`: the k-th's id, section and data;
    /// `sectionKey(k)`: its section key), after which the section index is reset to it.
    private mutating func group(
        count: Int, _ member: (Int) -> (id: String, section: String, data: JSONData),
        sectionKey: (Int) -> [UInt8]
    ) -> [Section] {
        var content: [Section] = []
        var keys: [OrderedIndex.Element] = []
        for k in 0..<count {
            let (id, section, data) = member(k)
            if content.last?.id.hasSameBytes(as: section) != true {
                content.append(Section(id: section, data: rules.sectionData(section)))
                keys.append(OrderedIndex.Element(key: sectionKey(k), id: section))
            }
            content[content.count - 1].items.append(Item(id: id, data: data))
        }
        if rules.sectionBy == nil, content.isEmpty {
            content = [Section(id: ViewRules.allSection)]
            keys = [OrderedIndex.Element(key: [], id: ViewRules.allSection)]
        }
        sections = OrderedIndex(sorted: keys)
        present = Dictionary(uniqueKeysWithValues: keys.map { (ExactString($0.id), $0.key) })
        return content
    }
}
