import Model

/// The inputs of `Bench diff`: DifferenceKit's published cases, a million ids with churn or with one move, and a
/// sectioned collection.
struct DiffInput {
    var name: String
    var old: [Section]
    var new: [Section]

    /// The inputs' names and makers, so that each is built only when measured (and its memory with it).
    static let all: [(name: String, make: @Sendable (inout SeededGenerator) -> DiffInput)] = [
        (
            "DifferenceKit 5k",
            { differenceKit(count: 5_000, removed: 2_000..<3_000, inserted: 1_000, shuffled: 200, generator: &$0) }
        ),
        (
            "DifferenceKit 100k",
            {
                differenceKit(
                    count: 100_000, removed: 20_000..<30_000, inserted: 10_000, shuffled: 2_000, generator: &$0)
            }
        ),
        ("1M, 10% churn", { churn(count: 1_000_000, generator: &$0) }),
        ("1M, one move", { oneMove(count: 1_000_000, generator: &$0) }),
        ("100 x 1k sectioned", { sectioned(generator: &$0) }),
    ]

    /// `count` UUIDs, `removed` positions removed, `inserted` new ones inserted at `removed.lowerBound`, then
    /// `target[0..<shuffled]` shuffled.
    static func differenceKit(
        count: Int, removed: Range<Int>, inserted: Int, shuffled: Int, generator: inout SeededGenerator
    ) -> DiffInput {
        let source = (0..<count).map { _ in generator.uuid() }
        var target = source
        target.removeSubrange(removed)
        target.insert(contentsOf: (0..<inserted).map { _ in generator.uuid() }, at: removed.lowerBound)
        target[0..<shuffled].shuffle(using: &generator)
        return DiffInput(name: "DifferenceKit \(count / 1000)k", old: single(source), new: single(target))
    }

    /// `count` ids, then 10% deleted, 10% inserted and 2% moved, at random positions.
    static func churn(count: Int, generator: inout SeededGenerator) -> DiffInput {
        let source = (0..<count).map { "id\($0)" }
        var keyed: [(key: Double, id: String)] = []
        keyed.reserveCapacity(count + count / 10)
        for (index, id) in source.enumerated() {
            switch Int.random(in: 0..<100, using: &generator) {
            case 0..<10: continue
            case 10..<12: keyed.append((Double.random(in: 0..<Double(count), using: &generator), id))
            default: keyed.append((Double(index), id))
            }
        }
        for n in 0..<count / 10 { keyed.append((Double.random(in: 0..<Double(count), using: &generator), "new\(n)")) }
        keyed.sort { $0.key < $1.key }
        return DiffInput(name: "1M, 10% churn", old: single(source), new: single(keyed.map(\.id)))
    }

    /// One element moved, from the first tenth to the last tenth: the worst case for the untouched prefix and
    /// suffix the diff skips (a random move spans a third of the list on average).
    static func oneMove(count: Int, generator: inout SeededGenerator) -> DiffInput {
        let source = (0..<count).map { "id\($0)" }
        var target = source
        let moved = target.remove(at: Int.random(in: 0..<count / 10, using: &generator))
        target.insert(moved, at: Int.random(in: count * 9 / 10..<count, using: &generator))
        return DiffInput(name: "1M, one move", old: single(source), new: single(target))
    }

    /// 100 sections of 1,000 items: 5 sections deleted, 5 inserted, 5 moved, 2 with new data; in each surviving
    /// section 10% of the items deleted, 10% inserted, 2% moved (half of them to another section), 5% new data.
    static func sectioned(generator: inout SeededGenerator) -> DiffInput {
        let old = (0..<100).map { s in
            Section(id: "s\(s)", items: (0..<1_000).map { Item(id: "s\(s)i\($0)") })
        }
        var new = old
        var order = Array(0..<100).shuffled(using: &generator)
        let deleted = Set(order.prefix(5))
        let moved = Array(order[5..<10])
        let dataChanged = order[10..<12]
        order = Array(0..<100)
        for s in dataChanged { new[s].data = JSONData(canonical: "1") }
        var travellers: [Item] = []
        for s in new.indices where !deleted.contains(s) {
            var keyed: [(key: Double, item: Item)] = []
            for (index, item) in new[s].items.enumerated() {
                var item = item
                switch Int.random(in: 0..<100, using: &generator) {
                case 0..<10: continue
                case 10..<11: travellers.append(item)
                case 11..<12: keyed.append((Double.random(in: 0..<1000, using: &generator), item))
                case 12..<17:
                    item.data = JSONData(canonical: "2")
                    keyed.append((Double(index), item))
                default: keyed.append((Double(index), item))
                }
            }
            for n in 0..<100 {
                keyed.append((Double.random(in: 0..<1000, using: &generator), Item(id: "s\(s)new\(n)")))
            }
            keyed.sort { $0.key < $1.key }
            new[s].items = keyed.map(\.item)
        }
        let survivors = new.indices.filter { !deleted.contains($0) }
        for item in travellers {
            let s = survivors.randomElement(using: &generator)!
            new[s].items.insert(item, at: Int.random(in: 0...new[s].items.count, using: &generator))
        }
        var result = survivors.filter { !moved.contains($0) }.map { new[$0] }
        for s in moved { result.insert(new[s], at: Int.random(in: 0...result.count, using: &generator)) }
        for n in 0..<5 {
            let section = Section(id: "fresh\(n)", items: (0..<1_000).map { Item(id: "fresh\(n)i\($0)") })
            result.insert(section, at: Int.random(in: 0...result.count, using: &generator))
        }
        return DiffInput(name: "100 x 1k sectioned", old: old, new: result)
    }

    private static func single(_ ids: [String]) -> [Section] {
        [Section(id: "s", items: ids.map { Item(id: $0) })]
    }
}
