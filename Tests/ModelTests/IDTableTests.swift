import Testing

@testable import Model

/// The id table against a dictionary: inserts, repeats, removals (with back shifts across the wrap-around of
/// small tables) and growth.
@Suite struct IDTableTests {
    @Test(arguments: [UInt64(1), 2, 3, 4])
    func randomInsertsAndRemovalsMatchADictionary(seed: UInt64) {
        var random = RandomContent(seed: seed)
        var ids: [String] = []
        var table = IDTable(capacity: 0)
        var model: [String: Int] = [:]
        for _ in 0..<20_000 {
            let name = "k\(random.int(0...600))"
            if random.chance(55) {
                ids.append(name)
                let existing = table.insert(ids.count - 1, of: ids)
                #expect(existing == model[name])
                if existing == nil { model[name] = ids.count - 1 }
            } else {
                table.remove(name, in: ids)
                model[name] = nil
            }
            #expect(table.count == model.count)
        }
        for n in 0...600 { #expect(table.find("k\(n)", in: ids) == model["k\(n)"]) }
        let bulk = IDTable(positions: ids.indices.filter { model[ids[$0]] == $0 }, of: ids)
        for (name, position) in model { #expect(bulk.find(name, in: ids) == position) }
    }
}
