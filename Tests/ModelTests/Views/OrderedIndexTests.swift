import Testing

@testable import Model

@Suite struct OrderedIndexTests {
    /// Random inserts and removals of short keys (many sharing their first eight bytes) through chunk splits,
    /// merges and emptied chunks, against a sorted array: ranks, elements by rank, membership.
    @Test(arguments: [UInt64(1), 2, 3])
    func followsASortedArray(seed: UInt64) {
        var generator = SeededGenerator(seed: seed)
        var index = OrderedIndex()
        var model: [[UInt8]] = []
        var checked = 0
        for step in 0..<6_000 {
            let grow = step < 3_000 ? 75 : 30
            if model.isEmpty || Int.random(in: 0..<100, using: &generator) < grow {
                var key: [UInt8] = [7, 7, 7, 7, 7, 7]
                for _ in 0..<Int.random(in: 0...4, using: &generator) {
                    key.append(UInt8.random(in: 0...3, using: &generator))
                }
                if Int.random(in: 0..<10, using: &generator) == 0 { key = [UInt8.random(in: 0...9, using: &generator)] }
                insert(key, id: "\(step)", into: &index, &model, "seed \(seed)")
            } else {
                remove(at: Int.random(in: 0..<model.count, using: &generator), from: &index, &model, "seed \(seed)")
            }
            if step % 97 == 0 || model.count < 3 {
                #expect(index.elements.map(\.key) == model, "seed \(seed) step \(step)")
                for (rank, key) in model.enumerated() where rank % 37 == 0 {
                    #expect(index[rank].key == key && index.rank(of: key) == rank && index.contains(key))
                }
                checked += 1
            }
        }
        #expect(index.count == model.count && checked > 60)
    }

    /// An index built from sorted elements (as a view is created) at sizes around the chunks' half and whole
    /// size, with keys sharing long prefixes, is the same set in the same order, and stays so through edits.
    @Test(arguments: [0, 1, 63, 64, 65, 128, 129, 1_000])
    func builtSortedFollowsASortedArray(count: Int) {
        var generator = SeededGenerator(seed: UInt64(count) + 11)
        var keys = Set<[UInt8]>()
        while keys.count < count {
            keys.insert(
                [1, 2, 3, 4, 5, 6, 7, 8, 9]
                    + (0..<Int.random(in: 1...3, using: &generator)).map { _ in
                        UInt8.random(in: 0...255, using: &generator)
                    })
        }
        var model = keys.sorted { $0.lexicographicallyPrecedes($1) }
        var index = OrderedIndex(sorted: model.lazy.map { OrderedIndex.Element(key: $0, id: "\($0)") })
        #expect(index.count == model.count && index.elements.map(\.key) == model)
        for (rank, key) in model.enumerated() {
            #expect(index[rank].key == key && index.rank(of: key) == rank && index.contains(key))
        }
        for step in 0..<2_000 {
            if model.isEmpty || Bool.random(using: &generator) {
                let key = [
                    1, 2, 3, 4, 5, UInt8.random(in: 5...7, using: &generator),
                    UInt8.random(in: 0...9, using: &generator),
                ]
                insert(key, id: "\(step)", into: &index, &model, "count \(count)")
            } else {
                remove(at: Int.random(in: 0..<model.count, using: &generator), from: &index, &model, "count \(count)")
            }
        }
        #expect(index.count == model.count && index.elements.map(\.key) == model, "count \(count)")
    }

    /// Inserts `key` (when the model lacks it) into both, expecting the index to give it the model's rank.
    private func insert(
        _ key: [UInt8], id: String, into index: inout OrderedIndex, _ model: inout [[UInt8]], _ note: String
    ) {
        let place = lowerBound(model, key)
        guard place == model.count || model[place] != key else { return }
        #expect(index.insert(OrderedIndex.Element(key: key, id: id)) == place, "\(note)")
        model.insert(key, at: place)
    }

    /// Removes the model's key at `place` from both, expecting the index to report that rank.
    private func remove(at place: Int, from index: inout OrderedIndex, _ model: inout [[UInt8]], _ note: String) {
        #expect(index.remove(model[place]) == place, "\(note)")
        model.remove(at: place)
    }

    private func lowerBound(_ keys: [[UInt8]], _ key: [UInt8]) -> Int {
        keys.firstIndex { !$0.lexicographicallyPrecedes(key) } ?? keys.count
    }
}
