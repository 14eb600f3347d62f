import Model

/// SplitMix64, seeded, so that a failing history can be replayed from its seed.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random mutations of a collection, each valid against the content it is drawn for.
struct RandomHistory {
    var random: SeededRandom
    private var nextID = 0

    init(seed: UInt64) { random = SeededRandom(state: seed) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }

    mutating func data() -> String { ["null", "1", "1.0", "{\"a\":[true]}", "\"x\""][int(0...4)] }

    /// A new id. Ids come in pairs that Swift's `String` finds equal but whose bytes differ ("é" as U+00E9, then
    /// as "e" + U+0301): the server and the mirror must keep them apart.
    mutating func freshID(_ prefix: String) -> String {
        nextID += 1
        return "\(prefix)\(nextID / 2)" + (nextID.isMultiple(of: 2) ? "\u{E9}" : "e\u{301}")
    }

    mutating func items(_ count: Int) -> [Item] {
        (0..<count).map { _ in Item(id: freshID("i"), data: JSONData(canonical: data())) }
    }

    mutating func sections(_ count: Int, maxItems: Int) -> [Section] {
        (0..<count).map { _ in
            Section(id: freshID("s"), data: JSONData(canonical: data()), items: items(int(0...maxItems)))
        }
    }

    /// A random whole new content made from `old` (sections and items inserted, deleted, moved, changed).
    mutating func edited(_ old: [Section]) -> [Section] {
        var sections = old
        for _ in 0..<int(1...8) {
            switch int(0...7) {
            case 0 where sections.count < 8:
                sections.insert(contentsOf: self.sections(1, maxItems: 4), at: int(0...sections.count))
            case 1 where !sections.isEmpty:
                sections.remove(at: int(0...sections.count - 1))
            case 2 where !sections.isEmpty:
                let section = sections.remove(at: int(0...sections.count - 1))
                sections.insert(section, at: int(0...sections.count))
            case 3 where !sections.isEmpty:
                sections[int(0...sections.count - 1)].data = JSONData(canonical: data())
            case 4 where !sections.isEmpty:
                let s = int(0...sections.count - 1)
                sections[s].items.insert(contentsOf: items(int(1...3)), at: int(0...sections[s].items.count))
            case 5, 6:
                guard let (s, i) = randomItem(in: sections) else { continue }
                let item = sections[s].items.remove(at: i)
                let t = chance(50) ? s : int(0...sections.count - 1)
                sections[t].items.insert(item, at: int(0...sections[t].items.count))
            default:
                guard let (s, i) = randomItem(in: sections) else { continue }
                if chance(50) {
                    sections[s].items.remove(at: i)
                } else {
                    sections[s].items[i].data = JSONData(canonical: data())
                }
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

    /// One op (as its JSON text) valid against `sections`, or nil when none of the kind drawn applies.
    mutating func op(on sections: [Section]) -> String? {
        switch int(0...7) {
        case 0:
            return "{\"op\":\"insertSections\",\"at\":\(int(0...sections.count)),\"sections\":"
                + bodyText(self.sections(int(1...2), maxItems: 3)) + "}"
        case 1:
            guard !sections.isEmpty else { return nil }
            return "{\"op\":\"deleteSections\",\"sections\":[\(int(0...sections.count - 1))]}"
        case 2:
            guard !sections.isEmpty else { return nil }
            let last = sections.count - 1
            return "{\"op\":\"moveSection\",\"section\":\(int(0...last)),\"to\":\(int(0...last))}"
        case 3:
            guard !sections.isEmpty else { return nil }
            return "{\"op\":\"updateSection\",\"section\":\(int(0...sections.count - 1)),\"data\":\(data())}"
        case 4:
            guard !sections.isEmpty else { return nil }
            let s = int(0...sections.count - 1)
            let new = items(int(1...4)).map { "{\"id\":\"\($0.id)\",\"data\":\($0.data)}" }.joined(separator: ",")
            return "{\"op\":\"insertItems\",\"at\":[\(s),\(int(0...sections[s].items.count))],\"items\":[\(new)]}"
        case 5:
            guard let (s, i) = randomItem(in: sections) else { return nil }
            return "{\"op\":\"deleteItems\",\"items\":[\"\(sections[s].items[i].id)\"]}"
        case 6:
            guard let (s, i) = randomItem(in: sections) else { return nil }
            let t = int(0...sections.count - 1)
            let count = sections[t].items.count - (s == t ? 1 : 0)
            return "{\"op\":\"moveItem\",\"item\":\"\(sections[s].items[i].id)\",\"to\":[\(t),\(int(0...count))]}"
        default:
            guard let (s, i) = randomItem(in: sections) else { return nil }
            return "{\"op\":\"updateItems\",\"items\":[{\"id\":\"\(sections[s].items[i].id)\",\"data\":\(data())}]}"
        }
    }
}
