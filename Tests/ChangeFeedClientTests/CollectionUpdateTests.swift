import ChangeFeedClient
import Foundation
import Model
import Testing

/// What `LiveCollection.apply` hands a view, as an app's own tests see it (no `@testable`): its moves can be built
/// and compared.
@Suite struct CollectionUpdateTests {
    @Test func anUpdateSaysWhatMovedInUIKitsTerms() throws {
        var live = LiveCollection()
        let start = try #require(Version("e.1"))
        let sections = [
            Section(id: "todo", items: [Item(id: "a"), Item(id: "b")]), Section(id: "done", items: [Item(id: "c")]),
        ]
        try live.apply(.reset(Snapshot(name: "board", version: start, sections: sections)))
        // Card "a" goes to the end of "done".
        let moveCard = Changeset(
            from: start, to: start.next,
            items: ItemChanges(
                moved: [Model.ItemMove(from: ItemPath(section: 0, item: 0), to: ItemPath(section: 1, item: 1), id: "a")]
            ))
        let moved = try live.apply(.changes(moveCard))
        #expect(moved.kind == .batch && moved.version == start.next)
        #expect(moved.movedItems == [CollectionUpdate.ItemMove(from: [0, 0], to: [1, 1])])
        #expect(moved.movedSections.isEmpty)
        // Then the columns swap.
        let swap = Changeset(
            from: start.next, to: start.next.next,
            sections: SectionChanges(moved: [Model.SectionMove(from: 1, to: 0, id: "done")]))
        let swapped = try live.apply(.changes(swap))
        #expect(swapped.movedSections == [CollectionUpdate.SectionMove(from: 1, to: 0)])
        #expect(swapped.identifiers.sectionIDs == ["done", "todo"])
        #expect(swapped.identifiers.itemIDs(inSection: 0) == ["c", "a"])
        #expect(swapped.identifiers.itemIDs(inSection: 1) == ["b"])
    }
}
