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
                let place = lowerBound(model, key)
                guard place == model.count || model[place] != key else { continue }
                #expect(index.insert(OrderedIndex.Element(key: key, id: "\(step)")) == place, "seed \(seed)")
                model.insert(key, at: place)
            } else {
                let place = Int.random(in: 0..<model.count, using: &generator)
                #expect(index.remove(model[place]) == place, "seed \(seed)")
                model.remove(at: place)
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

    private func lowerBound(_ keys: [[UInt8]], _ key: [UInt8]) -> Int {
        keys.firstIndex { !$0.lexicographicallyPrecedes(key) } ?? keys.count
    }
}
