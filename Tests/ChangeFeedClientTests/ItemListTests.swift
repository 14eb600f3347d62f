import Model
import Testing

@testable import ChangeFeedClient

/// The chunked item list against a plain array, through batches of removals then insertions in ascending
/// order (as `LiveCollection` drives it), with chunks split and emptied.
@Suite struct ItemListTests {
    @Test(arguments: [UInt64(7), 8, 9])
    func batchesMatchAnArray(seed: UInt64) {
        var random = RandomHistory(seed: seed)
        var reference = random.items(3000)
        var list = ItemList(reference)
        for _ in 0..<40 {
            let removals = Set((0..<random.int(0...400)).map { _ in random.int(0...max(reference.count - 1, 0)) })
                .filter { $0 < reference.count }.sorted()
            var cursor = ItemList.Cursor()
            for (offset, index) in removals.enumerated() {
                #expect(list.remove(at: index - offset, from: &cursor) == reference[index])
            }
            for index in removals.reversed() { reference.remove(at: index) }
            // Insertions bunched at one place, so that a chunk grows past twice its size and splits.
            let place = random.int(0...reference.count)
            let count = random.int(0...1500)
            let arrivals = random.items(count)
            cursor = ItemList.Cursor()
            for (offset, item) in arrivals.enumerated() {
                list.insert(item, at: place + offset, from: &cursor)
            }
            reference.insert(contentsOf: arrivals, at: place)
            list.dropEmptyChunks()
            #expect(list.count == reference.count)
            #expect(list.items == reference)
            #expect(list.chunks.allSatisfy { !$0.isEmpty && $0.count < 2 * ItemList.chunkSize })
        }
    }
}
