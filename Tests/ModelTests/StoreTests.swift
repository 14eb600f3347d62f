import Testing

@testable import Model

/// The chunked store against plain arrays, with sections large enough to split and merge chunks.
@Suite struct StoreTests {
    @Test(arguments: [UInt64(1), 2, 3])
    func randomEditsMatchPlainArrays(seed: UInt64) {
        var random = RandomContent(seed: seed)
        var model = (0..<3).map { s in Section(id: "s\(s)", items: random.items(s == 0 ? 3000 : 10)) }
        var store = Store(validated: model)
        for step in 0..<6000 {
            let s = random.int(0...model.count - 1)
            switch random.int(0...11) {
            case 0...3:
                let item = Item(id: random.freshID("n"), data: random.data())
                let i = random.int(0...model[s].items.count)
                model[s].items.insert(item, at: i)
                store.insertItem(item, at: path(s, i))
            case 4...6 where !model[s].items.isEmpty:
                let i = random.int(0...model[s].items.count - 1)
                #expect(store.removeItem(at: path(s, i)) == model[s].items.remove(at: i))
            case 7 where !model[s].items.isEmpty:
                let i = random.int(0...model[s].items.count - 1)
                let item = model[s].items.remove(at: i)
                let t = random.int(0...model.count - 1)
                let j = random.int(0...model[t].items.count)
                model[t].items.insert(item, at: j)
                store.moveItem(from: path(s, i), to: path(t, j))
            case 8:
                let id = random.freshID("s")
                let at = random.int(0...model.count)
                model.insert(Section(id: id), at: at)
                store.insertSection(id: id, data: .null, at: at)
            case 9 where !model[s].items.isEmpty:
                let i = random.int(0...model[s].items.count - 1)
                let data = random.data()
                model[s].items[i].data = data
                store.setItemData(data, at: path(s, i))
            case 10 where model[s].items.isEmpty && model.count > 1:
                model.remove(at: s)
                store.removeSection(at: s)
            case 10:
                let data = JSONData(canonical: "\(random.int(0...1_000_000))")
                model[s].data = data
                store.setSectionData(data, at: s)
            default:
                let to = random.int(0...model.count - 1)
                model.insert(model.remove(at: s), at: to)
                store.moveSection(from: s, to: to)
            }
            if step % 500 == 0 || step == 5999 {
                #expect(store.snapshot() == model, "seed \(seed) step \(step)")
                #expect(store.contentBytes == Self.contentBytes(model), "seed \(seed) step \(step)")
                for (s, section) in model.enumerated() {
                    #expect(store.sectionIndex(of: section.id) == s)
                    for (i, item) in section.items.enumerated() where i % 7 == 0 {
                        #expect(store.location(ofItem: item.id) == path(s, i), "seed \(seed) step \(step)")
                    }
                }
            }
        }
        #expect(store.itemCount == model.reduce(0) { $0 + $1.items.count })
    }

    /// What `Store.contentBytes` counts: the bytes of every id and every data.
    static func contentBytes(_ sections: [Section]) -> Int {
        sections.reduce(0) { total, section in
            section.items.reduce(total + section.id.utf8.count + section.data.bytes.count) {
                $0 + $1.id.utf8.count + $1.data.bytes.count
            }
        }
    }

    @Test func manySectionsSplitAndMergeTheSectionList() {
        var random = RandomContent(seed: 5)
        var model: [String] = []
        var store = Store()
        for step in 0..<9_000 {
            if step < 4_000 || random.chance(40) || model.isEmpty {
                let id = random.freshID("s")
                let at = random.int(0...model.count)
                model.insert(id, at: at)
                store.insertSection(id: id, data: .null, at: at)
            } else if random.chance(50) {
                let at = random.int(0...model.count - 1)
                model.remove(at: at)
                store.removeSection(at: at)
            } else {
                let from = random.int(0...model.count - 1)
                let to = random.int(0...model.count - 1)
                model.insert(model.remove(at: from), at: to)
                store.moveSection(from: from, to: to)
            }
        }
        #expect(store.sectionCount == model.count)
        for (index, id) in model.enumerated() where index % 3 == 0 {
            #expect(store.sectionIndex(of: id) == index)
            #expect(store.sectionID(at: index) == id)
        }
    }
}
