import Testing

@testable import Model

/// The example of API.md's Views section, changeset by changeset, and the life of a view whose source goes.
@Suite struct ViewMaintenanceExampleTests {
    static func task(_ id: String, _ status: String, _ priority: Int) -> Item {
        Item(id: id, data: json("{\"priority\":\(priority),\"status\":\"\(status)\"}"))
    }

    static func delta(_ source: VersionedCollection, since: Version) throws -> SourceDelta {
        try #require(SourceDelta(source: source, since: since))
    }

    @Test func theBoardOfTheContract() throws {
        var source = try VersionedCollection(
            epoch: "src",
            sections: [Section(id: "all", items: [Self.task("t1", "open", 3), Self.task("t2", "open", 1)])])
        _ = try source.apply([
            .insertItems(at: .init(section: .index(0), index: 2), items: [Self.task("t3", "doing", 2)])
        ])
        let text =
            "{\"source\":\"tasks\",\"sectionBy\":{\"field\":\"/status\"},"
            + "\"sortBy\":[{\"field\":\"/priority\",\"order\":\"desc\"}]}"
        let definition = try ViewDefinition(json: Array(text.utf8))
        var view = LiveView(epoch: "board", definition: definition, source: source)
        #expect(view.snapshot().map(\.id) == ["\"doing\"", "\"open\""])
        #expect(view.snapshot()[1].items.map(\.id) == ["t1", "t2"])
        #expect(view.snapshot()[0].data == json("{\"key\":\"doing\"}"))

        var before = (source.version, view.snapshot())
        _ = try source.apply([.updateItems([Self.task("t2", "open", 5)])])
        var applied = view.apply(try Self.delta(source, since: before.0))
        var changeset = try #require(applied)
        #expect(changeset.items.moved.count == 1)
        #expect(changeset.items.updated.map(\.at) == [path(1, 0)])
        #expect(changeset.sections.isEmpty)
        verify(changeset, from: before.1, to: view.snapshot(), "t2 moves")

        before = (source.version, view.snapshot())
        _ = try source.apply([.updateItems([Self.task("t3", "blocked", 2)])])
        applied = view.apply(try Self.delta(source, since: before.0))
        changeset = try #require(applied)
        #expect(changeset.sections.deleted == [SectionDeletion(index: 0, id: "\"doing\"")])
        #expect(changeset.sections.inserted.map(\.index) == [0])
        #expect(changeset.sections.inserted.first?.section.items.map(\.id) == ["t3"])
        #expect(changeset.sections.moved.isEmpty && changeset.items.isEmpty)
        verify(changeset, from: before.1, to: view.snapshot(), "t3 changes section")

        // A source change that leaves the view as it was commits no view version.
        let version = view.version
        before = (source.version, view.snapshot())
        _ = try source.apply([.moveItem(.id("t1"), to: .init(section: .index(0), index: 2))])
        applied = view.apply(try Self.delta(source, since: before.0))
        #expect(applied == nil)
        #expect(view.version == version)
    }

    @Test func aViewOfAMissingSourceEmptiesAndFillsAgain() throws {
        let definition = try ViewDefinition(source: "tasks", limit: 2)
        var view = LiveView(epoch: "v", definition: definition, source: nil)
        #expect(view.snapshot() == [Section(id: "all")])
        let source = try VersionedCollection(
            epoch: "one", sections: [Section(id: "s", items: [Item(id: "b"), Item(id: "a"), Item(id: "c")])])
        let created = view.apply(.created(source))
        let filled = try #require(created)
        #expect(view.snapshot() == [Section(id: "all", items: [Item(id: "a"), Item(id: "b")])])
        verify(filled, from: [Section(id: "all")], to: view.snapshot(), "created")
        let deleted = view.apply(.deleted)
        let emptied = try #require(deleted)
        #expect(view.snapshot() == [Section(id: "all")])
        #expect(emptied.items.deleted.count == 2 && view.version.seq == 3)
        let again = view.apply(.deleted)
        #expect(again == nil)
    }

    @Test func aNewSortOrderIsASetOfMinimalMoves() throws {
        let items = (0..<50).map { Item(id: "i\($0)", data: json("{\"n\":\(($0 * 7) % 50)}")) }
        let source = try VersionedCollection(epoch: "s", sections: [Section(id: "x", items: items)])
        var view = LiveView(epoch: "v", definition: try ViewDefinition(source: "s"), source: source)
        let old = view.snapshot()
        let byN = try ViewDefinition(source: "s", sortBy: [ViewKey(field: try #require(JSONPointer("/n")))])
        let changeset = view.redefine(byN, source: source)
        #expect(changeset.items.inserted.isEmpty && changeset.items.deleted.isEmpty && !changeset.items.moved.isEmpty)
        verify(changeset, from: old, to: view.snapshot(), "new order")
        let same = view.redefine(byN, source: source)
        #expect(same.isEmpty && same.from == same.to && same.to == changeset.to)
        // Another definition with the same content: a version of its own, with an empty changeset, which the
        // changes since any kept version go through.
        let byNThenID = try ViewDefinition(
            source: "s",
            sortBy: [ViewKey(field: try #require(JSONPointer("/n"))), ViewKey(field: try #require(JSONPointer("/id")))])
        let another = view.redefine(byNThenID, source: source)
        #expect(another.isEmpty && another.from == changeset.to && another.to == changeset.to.next)
        #expect(view.version == another.to)
        let since = try #require(view.changes(since: changeset.from))
        verify(since, from: old, to: view.snapshot(), "through the empty version")
        #expect(view.changes(since: changeset.to)?.isEmpty == true)
    }
}
