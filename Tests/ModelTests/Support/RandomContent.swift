@testable import Model

/// Random collections, edits and op batches for the property tests, all drawn from a seeded generator.
struct RandomContent {
    var generator: SeededGenerator
    private var nextID = 0

    init(seed: UInt64) {
        generator = SeededGenerator(seed: seed)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &generator) }
    mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }

    mutating func data() -> JSONData {
        [JSONData.null, JSONData(canonical: "1"), JSONData(canonical: "2"), JSONData(canonical: "{\"a\":[]}")][
            int(0...3)]
    }

    /// A new id. Ids come in pairs that Swift's `String` finds equal but whose bytes differ ("é" as U+00E9, then
    /// as "e" + U+0301), so that every property test also checks that no id is keyed or compared as a `String`.
    mutating func freshID(_ prefix: String) -> String {
        nextID += 1
        return "\(prefix)\(nextID / 2)" + (nextID.isMultiple(of: 2) ? "\u{E9}" : "e\u{301}")
    }

    mutating func items(_ count: Int) -> [Item] {
        (0..<count).map { _ in Item(id: freshID("i"), data: data()) }
    }

    mutating func sections(maxSections: Int = 6, maxItems: Int = 8) -> [Section] {
        (0..<int(0...maxSections)).map { _ in Section(id: freshID("s"), data: data(), items: items(int(0...maxItems))) }
    }

    /// A random edit of a whole snapshot: section inserts, deletes, moves and data changes; item inserts,
    /// deletes, moves within and across sections and data changes; sometimes many of them.
    mutating func edited(_ old: [Section]) -> [Section] {
        var sections = old
        for _ in 0..<int(0...(chance(20) ? 30 : 6)) {
            switch int(0...8) {
            case 0 where sections.count < 10:
                sections.insert(
                    Section(id: freshID("s"), data: data(), items: items(int(0...4))), at: int(0...sections.count))
            case 1 where !sections.isEmpty:
                sections.remove(at: int(0...sections.count - 1))
            case 2 where !sections.isEmpty:
                let section = sections.remove(at: int(0...sections.count - 1))
                sections.insert(section, at: int(0...sections.count))
            case 3 where !sections.isEmpty:
                sections[int(0...sections.count - 1)].data = data()
            case 4 where !sections.isEmpty:
                let s = int(0...sections.count - 1)
                sections[s].items.insert(Item(id: freshID("i"), data: data()), at: int(0...sections[s].items.count))
            case 5, 6:
                guard let (s, i) = randomItem(in: sections) else { continue }
                let item = sections[s].items.remove(at: i)
                let t = chance(50) ? s : int(0...sections.count - 1)
                sections[t].items.insert(item, at: int(0...sections[t].items.count))
            case 7:
                guard let (s, i) = randomItem(in: sections) else { continue }
                if chance(50) { sections[s].items.remove(at: i) } else { sections[s].items[i].data = data() }
            default:
                if chance(10) { sections.reverse() }
                if chance(10), !sections.isEmpty { sections[int(0...sections.count - 1)].items.reverse() }
            }
        }
        return sections
    }

    mutating func randomItem(in sections: [Section]) -> (Int, Int)? {
        let nonEmpty = sections.indices.filter { !sections[$0].items.isEmpty }
        guard !nonEmpty.isEmpty else { return nil }
        let s = nonEmpty[int(0...nonEmpty.count - 1)]
        return (s, int(0...sections[s].items.count - 1))
    }

    /// An index that is usually in `0...upper`, sometimes just outside, sometimes absurd.
    mutating func index(upTo upper: Int) -> Int {
        switch int(0...99) {
        case 0: return Int.max
        case 1: return Int.min
        case 2: return -1
        case 3: return upper + 1
        default: return int(0...max(upper, 0))
        }
    }

    mutating func sectionRef(in sections: [Section]) -> SectionRef {
        let index = self.index(upTo: sections.count - 1)
        if chance(50), sections.indices.contains(index) { return .id(sections[index].id) }
        return chance(3) ? .id("nope") : .index(index)
    }

    mutating func itemRef(in sections: [Section]) -> ItemRef {
        guard let (s, i) = randomItem(in: sections), !chance(3) else { return .id(chance(50) ? "" : "nope") }
        return chance(50) ? .id(sections[s].items[i].id) : .path(chance(50) ? .index(s) : .id(sections[s].id), i)
    }

    /// A random op against `sections`, usually valid.
    mutating func op(on sections: [Section]) -> Op {
        let itemCount = sections.reduce(0) { $0 + $1.items.count }
        switch int(0...9) {
        case 0:
            return .insertSections(
                at: index(upTo: sections.count), sections: self.sections(maxSections: 2, maxItems: 3))
        case 1:
            return .deleteSections((0..<int(0...2)).map { _ in sectionRef(in: sections) })
        case 2:
            return .moveSection(sectionRef(in: sections), to: index(upTo: sections.count - 1))
        case 3:
            return .updateSection(sectionRef(in: sections), data: data())
        case 4, 5:
            let ref = sectionRef(in: sections)
            let count = (try? Store(validated: sections).resolve(ref)).map { sections[$0].items.count } ?? 0
            var new = items(int(0...3))
            if chance(3), itemCount > 0, let (s, i) = randomItem(in: sections) { new.append(sections[s].items[i]) }
            return .insertItems(at: ItemPosition(section: ref, index: index(upTo: count)), items: new)
        case 6:
            return .deleteItems((0..<int(0...3)).map { _ in itemRef(in: sections) })
        case 7, 8:
            let ref = sectionRef(in: sections)
            let count = (try? Store(validated: sections).resolve(ref)).map { sections[$0].items.count } ?? 0
            return .moveItem(itemRef(in: sections), to: ItemPosition(section: ref, index: index(upTo: count)))
        default:
            return .updateItems(
                (0..<int(0...3)).compactMap { _ in
                    guard let (s, i) = randomItem(in: sections) else { return nil }
                    return Item(id: chance(3) ? "nope" : sections[s].items[i].id, data: data())
                })
        }
    }
}
