import Testing

@testable import Model

/// Hand-written diffs with their exact expected changesets.
@Suite struct DiffExampleTests {
    /// The CollectionView example: section A moves behind B and Y moves inside B (to its end; keeping X Z in
    /// place and moving Y, or keeping X Y and moving Z, are both one move).
    @Test func collectionViewExample() throws {
        let changeset = try replacing(sections("A: H J K", "B: X Y Z"), with: sections("B: X Z Y", "A: H J K"))
        #expect(changeset.sections == SectionChanges(moved: [SectionMove(from: 0, to: 1, id: "A")]))
        let moves = [
            ItemMove(from: path(1, 1), to: path(0, 2), id: "Y"), ItemMove(from: path(1, 2), to: path(0, 1), id: "Z"),
        ]
        #expect(changeset.items.moved.count == 1 && moves.contains(changeset.items.moved[0]))
        #expect(changeset.items.deleted.isEmpty && changeset.items.inserted.isEmpty && changeset.items.updated.isEmpty)
    }

    /// Y moves into A, which moves too: A is sent as a delete and an insert, Y only inside it.
    @Test func movedSectionThatGainsAnItemIsRebuilt() throws {
        let changeset = try replacing(sections("A: H J K", "B: X Y Z"), with: sections("B: X Z", "A: H Y J K"))
        #expect(changeset.sections.moved.isEmpty)
        #expect(changeset.sections.deleted == [SectionDeletion(index: 0, id: "A")])
        #expect(changeset.sections.inserted.map(\.index) == [1])
        #expect(changeset.items == ItemChanges(deleted: [ItemDeletion(at: path(1, 1), id: "Y")]))
    }

    @Test func oneMoveInALongList() throws {
        let ids = (0..<10_000).map { "i\($0)" }
        var moved = ids
        moved.insert(moved.remove(at: 1234), at: 8765)
        let changeset = try replacing(
            [Section(id: "s", items: ids.map { Item(id: $0) })],
            with: [Section(id: "s", items: moved.map { Item(id: $0) })])
        #expect(changeset.items == ItemChanges(moved: [ItemMove(from: path(0, 1234), to: path(0, 8765), id: "i1234")]))
        #expect(changeset.sections.isEmpty)
    }

    @Test func reversalMovesAllButOne() throws {
        let items = (0..<500).map { Item(id: "i\($0)") }
        let changeset = try replacing(
            [Section(id: "s", items: items)], with: [Section(id: "s", items: items.reversed())])
        #expect(changeset.items.moved.count == 499)
        #expect(changeset.items.deleted.isEmpty && changeset.items.inserted.isEmpty)
    }

    @Test func allItemsReplaced() throws {
        let changeset = try replacing(sections("s: a b c"), with: sections("s: x y"))
        #expect(changeset.items.deleted.map(\.id) == ["a", "b", "c"])
        #expect(changeset.items.inserted.map(\.at) == [path(0, 0), path(0, 1)])
        #expect(changeset.items.moved.isEmpty && changeset.sections.isEmpty)
    }

    @Test func onlyItemMovesToAnotherSection() throws {
        let changeset = try replacing(sections("A: x", "B:"), with: sections("A:", "B: x"))
        #expect(changeset.items == ItemChanges(moved: [ItemMove(from: path(0, 0), to: path(1, 0), id: "x")]))
    }

    @Test func dataChangesAreUpdatesAtNewCoordinates() throws {
        let old = [Section(id: "A", items: [Item(id: "a"), Item(id: "b")]), Section(id: "B", data: json("1"))]
        let new = [
            Section(id: "B", data: json("2")),
            Section(id: "A", items: [Item(id: "b", data: json("3")), Item(id: "a")]),
        ]
        let changeset = try replacing(old, with: new)
        #expect(changeset.sections.updated == [SectionUpdate(index: 0, id: "B", data: json("2"))])
        #expect(changeset.items.updated == [ItemUpdate(at: path(1, 0), item: Item(id: "b", data: json("3")))])
    }

    @Test func itemsOfDeletedAndInsertedSectionsAreNotListed() throws {
        let changeset = try replacing(sections("A: a b", "B: c"), with: sections("B: c a", "C: b"))
        #expect(changeset.sections.deleted == [SectionDeletion(index: 0, id: "A")])
        #expect(changeset.sections.inserted.map(\.section.id) == ["C"])
        #expect(changeset.items.inserted.map(\.item.id) == ["a"])
        #expect(changeset.items.moved.isEmpty && changeset.items.deleted.isEmpty)
    }

    @Test func creationIsAllSectionsInserted() throws {
        let content = sections("A: a", "B:")
        let collection = try VersionedCollection(epoch: "e", sections: content)
        let changeset = try #require(collection.changes(since: Version(epoch: "e", seq: 0)))
        #expect(changeset.sections.inserted.map(\.section) == content)
        #expect(changeset.items.isEmpty)
    }
}
