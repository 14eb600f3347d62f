@testable import Model

/// Random item data, view definitions and source mutations for the view property tests, from a seeded generator.
struct RandomViews {
    var generator: SeededGenerator
    private var serial = 0

    init(seed: UInt64) {
        generator = SeededGenerator(seed: seed)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &generator) }
    mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }
    mutating func pick<T>(_ values: [T]) -> T { values[int(0...values.count - 1)] }

    static let scalars: [JSON] = [
        .null, .bool(true), .bool(false), .number("0"), .number("1"), .number("2"), .number("-1"), .number("1.5"),
        .number("1.0"), .number("-0"),
        // Past 2^53: one `Double` apart from each other, or the same one.
        .number("1700000000000000001"), .number("1700000000000000100"), .number("-1700000000000000001"),
        .number("-1700000000000000100"), .number("17000000000000000.01e2"), .string("x"), .string("y"), .string("xy"),
        .string(""), .string("é"),
        .string("x\"y"), .array([.number("1")]), .array([]), .object(["k": .number("1")]),
        // Equal to "é" for Swift's `String`, a different value for the contract (bytes).
        .string("e\u{301}"), .object(["\u{E9}": .number("1"), "e\u{301}": .number("1")]),
    ]
    static let fields = ["/a", "/b", "/c", "/n/a", "/l/0", "/zz", "/a~1b", ""]

    mutating func value() -> JSON { pick(RandomViews.scalars) }

    /// An object with some of the fields a, b, c, "a/b", a nested object n and an array l; now and then no
    /// object at all.
    mutating func data() -> JSONData {
        if chance(5) { return value().data }
        var members: [ExactString: JSON] = [:]
        for name: ExactString in ["a", "b", "c", "a/b"] where chance(70) { members[name] = value() }
        if chance(40) { members["n"] = .object(chance(80) ? ["a": value()] : [:]) }
        if chance(20) { members["l"] = .array((0..<int(0...2)).map { _ in value() }) }
        return JSON.object(members).data
    }

    /// A new id; pairs of them differ only as "é" (U+00E9) and "e" + U+0301 do (`RandomContent.freshID`).
    mutating func freshID(_ prefix: String) -> String {
        serial += 1
        return "\(prefix)\(serial / 2)" + (serial.isMultiple(of: 2) ? "\u{E9}" : "e\u{301}")
    }

    mutating func items(_ count: Int) -> [Item] { (0..<count).map { _ in Item(id: freshID("i"), data: data()) } }

    mutating func content() -> [Section] {
        (0..<int(0...4)).map { _ in Section(id: freshID("s"), items: items(int(0...8))) }
    }

    mutating func field() -> JSONPointer {
        guard let pointer = JSONPointer(pick(RandomViews.fields)) else { preconditionFailure("bad test pointer") }
        return pointer
    }

    mutating func filter(depth: Int = 0) -> ViewFilter {
        if depth < 3, chance(35) {
            switch int(0...2) {
            case 0: return .all((0..<int(0...3)).map { _ in filter(depth: depth + 1) })
            case 1: return .any((0..<int(0...3)).map { _ in filter(depth: depth + 1) })
            default: return .not(filter(depth: depth + 1))
            }
        }
        let tests: [ViewTest] = [
            .eq(value()), .ne(value()), .lt(value()), .le(value()), .gt(value()), .ge(value()),
            .in((0..<(chance(20) ? int(9...16) : int(0...3))).map { _ in value() }), .exists(chance(50)),
            .prefix(pick(["x", "", "é", "y"])),
        ]
        return .leaf(field: field(), pick(tests))
    }

    mutating func definition(source: String) -> ViewDefinition {
        do {
            return try ViewDefinition(
                source: source, filter: chance(70) ? filter() : nil,
                sectionBy: chance(50) ? ViewKey(field: field(), descending: chance(50)) : nil,
                sortBy: (0..<int(0...3)).map { _ in ViewKey(field: field(), descending: chance(50)) },
                limit: chance(40) ? int(1...10) : nil)
        } catch {
            preconditionFailure("a random definition is invalid: \(error)")
        }
    }

    /// A batch of 1 to 3 valid ops on `sections`: item inserts, deletes, data updates and moves, section
    /// inserts (with items), deletes and data updates.
    mutating func ops(on sections: [Section]) -> [Op] {
        var ops: [Op] = []
        var state = sections
        for _ in 0..<int(1...3) {
            let items = state.flatMap(\.items)
            let op: Op
            switch int(0...8) {
            case 0 where !state.isEmpty:
                let s = int(0...state.count - 1)
                let at = ItemPosition(section: .index(s), index: int(0...state[s].items.count))
                op = .insertItems(at: at, items: self.items(int(1...3)))
            case 1 where !items.isEmpty:
                op = .deleteItems([.id(pick(items).id)])
            case 2 where !items.isEmpty, 7 where !items.isEmpty:
                let chosen = Set((0..<int(1...3)).map { _ in pick(items).id })
                op = .updateItems(chosen.sorted().map { Item(id: $0, data: data()) })
            case 3 where !items.isEmpty:
                let s = int(0...state.count - 1)
                let item = pick(items).id
                let from = state.firstIndex { $0.items.contains { $0.id == item } }
                let count = state[s].items.count - (from == s ? 1 : 0)
                op = .moveItem(.id(item), to: ItemPosition(section: .index(s), index: int(0...max(count, 0))))
            case 4 where !state.isEmpty:
                op = .deleteSections([.index(int(0...state.count - 1))])
            case 5 where !state.isEmpty:
                op = .updateSection(.index(int(0...state.count - 1)), data: data())
            default:
                op = .insertSections(
                    at: int(0...state.count), sections: [Section(id: freshID("s"), items: self.items(int(0...3)))])
            }
            var collection: VersionedCollection
            do {
                collection = try VersionedCollection(epoch: "t", sections: state)
                _ = try collection.apply([op])
            } catch {
                continue
            }
            state = collection.snapshot()
            ops.append(op)
        }
        return ops
    }

    /// A new content for a `PUT`: some items kept (with new data or not), some new, in new sections.
    mutating func replacement(of sections: [Section]) -> [Section] {
        let kept = sections.flatMap(\.items).filter { _ in chance(60) }.map { item in
            chance(50) ? Item(id: item.id, data: data()) : item
        }
        var pool = kept + items(int(0...5))
        pool.shuffle(using: &generator)
        var content: [Section] = []
        while !pool.isEmpty || content.isEmpty {
            let count = min(int(0...4), pool.count)
            content.append(Section(id: freshID("s"), items: Array(pool.prefix(count))))
            pool.removeFirst(count)
        }
        return content
    }
}
