import Testing

@testable import Model

/// The changeset of a single item change (or of the two a live view makes of one: an item moved and given other
/// data, or one removed and another inserted), read straight off the changes, is the one the general route
/// (`LogDelta` and `Assembly`) builds from the same log, to the bytes of its ids, and UIKit accepts it.
@Suite struct SingleChangeTests {
    @Test func aSingleItemChangeGivesTheChangesetOfTheGeneralRoute() {
        let from = Version(epoch: "e", seq: 1)
        let to = Version(epoch: "e", seq: 2)
        var checked: [String: Int] = [:]
        for seed in UInt64(0)..<600 {
            var random = RandomContent(seed: seed)
            var old = random.sections(maxSections: 4, maxItems: 6)
            if old.isEmpty { old = [Section(id: "only", items: random.items(random.int(0...3)))] }
            var editor = Editor(store: Store(validated: old))
            let kind = Self.applyOneChange(&editor, &random)
            guard (1...2).contains(editor.log.count) else { continue }
            let log = editor.log[...]
            guard let delta = LogDelta.delta(for: log, in: editor.store) else {
                Issue.record("seed \(seed): a \(kind) cannot be followed")
                continue
            }
            guard let single = SingleChange.changeset(for: log, in: editor.store, from: from, to: to) else {
                // Only a swap of neighbours, and an item removed and inserted again (a move, which may tie too),
                // are left to the general route.
                if case .itemMoved(_, let a, let i, let b, let j) = editor.log[0], a == b, abs(i - j) == 1 {
                    checked["swap of neighbours", default: 0] += 1
                } else if kind == "removal and re-insert" {
                    checked[kind, default: 0] += 1
                } else {
                    Issue.record("seed \(seed): a \(kind) is not read off the change")
                }
                continue
            }
            #expect(kind != "removal and re-insert", "seed \(seed): a move read as a deletion and an insertion")
            let general = assembleChangeset(delta, new: editor.store, from: from, to: to)
            // `==` compares ids as Swift strings, which find "é" composed and decomposed equal; the dumps' bytes
            // tell them apart.
            #expect(single == general && "\(single)".utf8.elementsEqual("\(general)".utf8), "seed \(seed), a \(kind)")
            verify(single, from: old, to: editor.store.snapshot(), "seed \(seed), a \(kind)")
            checked[kind, default: 0] += 1
        }
        let kinds = [
            "insert", "removal", "move within a section", "move to another section", "data change",
            "move and data change", "removal and another insert", "removal and re-insert", "swap of neighbours",
        ]
        for kind in kinds {
            #expect(checked[kind, default: 0] >= 20, "only \(checked[kind, default: 0]) of \(kind)")
        }
    }

    /// One random item edit through the editor; what kind it was.
    private static func applyOneChange(_ editor: inout Editor, _ random: inout RandomContent) -> String {
        let sections = editor.store.snapshot()
        let filled = sections.indices.filter { !sections[$0].items.isEmpty }
        let target = random.int(0...sections.count - 1)
        guard let source = filled.isEmpty ? nil : filled[random.int(0...filled.count - 1)], random.chance(80) else {
            let at = ItemPath(section: target, item: random.int(0...sections[target].items.count))
            editor.insertItem(Item(id: random.freshID("new"), data: random.data()), at: at)
            return "insert"
        }
        let path = ItemPath(section: source, item: random.int(0...sections[source].items.count - 1))
        switch random.int(0...6) {
        case 0:
            editor.removeItem(at: path)
            return "removal"
        case 1:
            editor.moveItem(
                from: path, to: ItemPath(section: source, item: random.int(0...sections[source].items.count - 1)))
            return "move within a section"
        case 2:
            let count = sections[target].items.count - (target == source ? 1 : 0)
            editor.moveItem(from: path, to: ItemPath(section: target, item: random.int(0...count)))
            return target == source ? "move within a section" : "move to another section"
        case 3:
            let count = sections[target].items.count - (target == source ? 1 : 0)
            let to = ItemPath(section: target, item: random.int(0...count))
            editor.moveItem(from: path, to: to)
            editor.setItemData(random.data(), at: to)
            return editor.log.count == 2 ? "move and data change" : "move or data change alone"
        case 4:
            editor.removeItem(at: path)
            let count = sections[target].items.count - (target == source ? 1 : 0)
            let at = ItemPath(section: target, item: random.int(0...count))
            editor.insertItem(Item(id: random.freshID("new"), data: random.data()), at: at)
            return "removal and another insert"
        case 5:
            let item = sections[source].items[path.item]
            editor.removeItem(at: path)
            let count = sections[target].items.count - (target == source ? 1 : 0)
            editor.insertItem(item, at: ItemPath(section: target, item: random.int(0...count)))
            return "removal and re-insert"
        default:
            editor.setItemData(random.data(), at: path)
            return "data change"
        }
    }
}
