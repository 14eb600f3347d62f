import Testing

@testable import Model

/// Which filters imply a gate (`ViewGate`), and which views a change is handed to (`ViewDispatch`): a view it
/// is not handed to would not have changed.
@Suite struct ViewDispatchTests {
    private func pointer(_ text: String) throws -> JSONPointer { try #require(JSONPointer(text)) }

    @Test func filtersThatFixAFieldsValuesImplyAGate() throws {
        let owner = try pointer("/owner")
        let status = try pointer("/status")
        let eq = ViewFilter.leaf(field: owner, .eq(.string("u1")))
        #expect(ViewGate(eq)?.pointer == owner)
        #expect(ViewGate(eq)?.texts == [Array("\"u1\"".utf8)])
        let list = ViewFilter.leaf(field: status, .in([.string("todo"), .null, .number("1.0")]))
        #expect(ViewGate(list)?.texts == [Array("\"todo\"".utf8), Array("null".utf8), Array("1.0".utf8)])
        // Of an `all`, the narrowest gate; the other tests may be anything.
        let both = ViewFilter.all([list, .leaf(field: status, .exists(true)), eq])
        #expect(ViewGate(both)?.pointer == owner)
        #expect(ViewGate(.all([.not(eq), .leaf(field: owner, .gt(.number("1")))])) == nil)
        #expect(ViewGate(.all([])) == nil)
        #expect(ViewGate(.any([eq, eq])) == nil)
        #expect(ViewGate(.not(eq)) == nil)
        #expect(ViewGate(.leaf(field: owner, .ne(.string("u1")))) == nil)
        #expect(ViewGate(.leaf(field: owner, .prefix("u"))) == nil)
        let definition = try ViewDefinition(source: "s", filter: both, sectionBy: nil, sortBy: [], limit: nil)
        #expect(definition.gate?.pointer == owner)
        #expect(try ViewDefinition(source: "s", filter: nil, sectionBy: nil, sortBy: [], limit: nil).gate == nil)
    }

    /// One view per user over one source: a write to one user's item goes to that user's view alone, and a
    /// write that moves an item from one user to another goes to both; views without a gate get every write.
    @Test func aWriteGoesToTheViewsOfTheValuesItTouches() throws {
        let owner = try pointer("/owner")
        func view(_ user: String) -> ViewGate? { ViewGate(.leaf(field: owner, .eq(.string(user)))) }
        let dispatch = ViewDispatch([
            (target: "u1", gate: view("u1")), (target: "u2", gate: view("u2")), (target: "all", gate: nil),
            (target: "u3", gate: view("u3")),
        ])
        var source = try VersionedCollection(epoch: "s", sections: [Section(id: "default", items: [])])
        func data(_ user: String) -> JSONData { JSONData(canonical: Array("{\"owner\":\"\(user)\"}".utf8)) }
        func step(_ ops: [Op]) throws -> [String] {
            let since = source.version
            _ = try source.apply(ops)
            return dispatch.targets(touchedBy: try #require(SourceDelta(source: source, since: since)))
        }
        let at = ItemPosition(section: .index(0), index: 0)
        #expect(try step([.insertItems(at: at, items: [Item(id: "c1", data: data("u1"))])]) == ["u1", "all"])
        #expect(try step([.updateItems([Item(id: "c1", data: data("u2"))])]) == ["u1", "u2", "all"])
        #expect(try step([.moveItem(.id("c1"), to: at)]) == ["all"])
        #expect(try step([.deleteItems([.id("c1")])]) == ["u2", "all"])
        #expect(try step([.insertItems(at: at, items: [Item(id: "c2", data: data("u9"))])]) == ["all"])
        // A field that is missing reads as null, as `eq` reads it.
        let nulls = ViewDispatch([(target: "null", gate: ViewGate(.leaf(field: owner, .eq(.null))))])
        let since = source.version
        let empty = Item(id: "c3", data: JSONData(canonical: Array("{}".utf8)))
        _ = try source.apply([.insertItems(at: at, items: [empty])])
        #expect(nulls.targets(touchedBy: try #require(SourceDelta(source: source, since: since))) == ["null"])
        // A source created or deleted is handed to every view.
        #expect(dispatch.targets(touchedBy: .deleted) == ["u1", "u2", "all", "u3"])
        #expect(dispatch.targets(touchedBy: .created(source)) == ["u1", "u2", "all", "u3"])
    }

    /// Random views, half of them gated, over a source under random batches, replacements, deletion and
    /// re-creation: every view the dispatch leaves out of a change gives no changeset and keeps its content when
    /// handed it, and every view equals the naive evaluation after each step.
    @Test func viewsLeftOutOfAChangeWouldNotHaveChanged() throws {
        var handed = 0
        var leftOut = 0
        var changed = 0
        for seed in UInt64(1)...60 {
            var random = RandomViews(seed: seed)
            var source: VersionedCollection? = try VersionedCollection(epoch: "s1", sections: random.content())
            var definitions: [ViewDefinition] = []
            for _ in 0..<12 {
                let definition = random.definition(source: "tasks")
                guard random.chance(50) else {
                    definitions.append(definition)
                    continue
                }
                let gate: ViewFilter =
                    random.chance(50)
                    ? .leaf(field: random.field(), .eq(random.value()))
                    : .leaf(field: random.field(), .in((0..<random.int(1...3)).map { _ in random.value() }))
                definitions.append(
                    try ViewDefinition(
                        source: "tasks", filter: .all([gate] + (definition.filter.map { [$0] } ?? [])),
                        sectionBy: definition.sectionBy, sortBy: definition.sortBy, limit: definition.limit))
            }
            var views = definitions.map { LiveView(epoch: "v", definition: $0, source: source) }
            let dispatch = ViewDispatch(views.indices.map { (target: $0, gate: definitions[$0].gate) })
            for step in 0..<40 {
                let context = "seed \(seed) step \(step)"
                let since = source?.version
                let delta: SourceDelta
                switch random.int(0...99) {
                case 0..<80 where source != nil:
                    let ops = random.ops(on: source?.snapshot() ?? [])
                    _ = try source?.apply(ops)
                    delta = try #require(source.flatMap { SourceDelta(source: $0, since: since ?? $0.version) })
                case 0..<88 where source != nil:
                    let replacement = random.replacement(of: source?.snapshot() ?? [])
                    _ = try source?.replace(with: replacement)
                    delta = try #require(source.flatMap { SourceDelta(source: $0, since: since ?? $0.version) })
                case 0..<94 where source != nil:
                    source = nil
                    delta = .deleted
                default:
                    source = try VersionedCollection(epoch: "s\(seed)-\(step)", sections: random.content())
                    delta = .created(try #require(source))
                }
                let targets = Set(dispatch.targets(touchedBy: delta))
                for index in views.indices {
                    let before = (views[index].version, views[index].snapshot())
                    let changeset = views[index].apply(delta)
                    if changeset != nil { changed += 1 }
                    if targets.contains(index) {
                        handed += 1
                    } else {
                        leftOut += 1
                        #expect(changeset == nil, "\(context): view \(index) left out but changed")
                        #expect(views[index].version == before.0 && views[index].snapshot() == before.1, "\(context)")
                    }
                    let expected = NaiveView.content(definitions[index], source: source?.snapshot())
                    #expect(views[index].snapshot() == expected, "\(context): view \(index)")
                }
            }
        }
        #expect(leftOut >= 5_000 && handed >= 5_000 && changed >= 2_000, "\(leftOut) \(handed) \(changed)")
    }
}
