import Model
import Testing

@testable import ChangeFeedClient

/// A changeset made by hand (not decoded from a feed) that breaks a rule the decoder checks is refused with
/// `FeedError.invalidChangeset` by `LiveCollection.apply`, as its documentation promises, never a trap.
@Suite struct MirrorRefusalTests {
    static let start = Version("e.1")!
    static let next = Version("e.2")!

    static func mirror() throws -> LiveCollection {
        var live = LiveCollection()
        let sections = [Section(id: "s", items: [Item(id: "a"), Item(id: "b")])]
        try live.apply(.reset(Snapshot(name: "c", version: start, sections: sections)))
        return live
    }

    static let broken: [(String, ItemChanges, SectionChanges)] = [
        (
            "unsorted deletions",
            ItemChanges(deleted: [
                ItemDeletion(at: ItemPath(section: 0, item: 1), id: "b"),
                ItemDeletion(at: ItemPath(section: 0, item: 0), id: "a"),
            ]), SectionChanges()
        ),
        (
            "negative item index", ItemChanges(deleted: [ItemDeletion(at: ItemPath(section: 0, item: -1), id: "b")]),
            SectionChanges()
        ),
        (
            "unsorted updates",
            ItemChanges(updated: [
                ItemUpdate(at: ItemPath(section: 0, item: 1), item: Item(id: "b")),
                ItemUpdate(at: ItemPath(section: 0, item: 0), item: Item(id: "a")),
            ]), SectionChanges()
        ),
        ("negative section index", ItemChanges(), SectionChanges(deleted: [SectionDeletion(index: -1, id: "s")])),
    ]

    @Test(arguments: broken)
    func aBrokenChangesetIsRefused(name: String, items: ItemChanges, sections: SectionChanges) throws {
        var live = try Self.mirror()
        let changeset = Changeset(from: Self.start, to: Self.next, sections: sections, items: items)
        #expect(throws: FeedError.self, "\(name)") { try live.apply(.changes(changeset)) }
        #expect(live.version == nil, "a refused changeset leaves the mirror without a version")
    }

    /// A changeset that does not start at the mirror's version (applied twice, say) is refused naming the version
    /// the mirror was at, not the none it is left with.
    @Test func aChangesetFromAnotherVersionIsRefusedNamingTheMirrorsVersion() throws {
        var live = try Self.mirror()
        let changeset = Changeset(
            from: Self.start, to: Self.next,
            items: ItemChanges(deleted: [ItemDeletion(at: ItemPath(section: 0, item: 0), id: "a")]))
        try live.apply(.changes(changeset))
        #expect(throws: FeedError.invalidChangeset("a changeset from e.1 for a mirror at e.2")) {
            try live.apply(.changes(changeset))
        }
        #expect(live.version == nil)
    }

    /// A changeset that fails halfway (its deletion fits, its insertion does not) leaves the content as it was: a
    /// view still showing it asks for its rows by the old indices, and a mirror left with half the changeset
    /// trapped on the last row.
    @Test func aChangesetThatFailsHalfwayLeavesTheContentAsItWas() throws {
        var live = try Self.mirror()
        let before = live.sections
        let halfway = [
            ItemChanges(
                deleted: [ItemDeletion(at: ItemPath(section: 0, item: 0), id: "a")],
                inserted: [ItemInsertion(at: ItemPath(section: 3, item: 0), item: Item(id: "x"))]),
            ItemChanges(
                deleted: [ItemDeletion(at: ItemPath(section: 0, item: 0), id: "a")],
                inserted: [ItemInsertion(at: ItemPath(section: 0, item: 0), item: Item(id: "b"))]),
            ItemChanges(
                inserted: [ItemInsertion(at: ItemPath(section: 0, item: 2), item: Item(id: "c"))],
                updated: [ItemUpdate(at: ItemPath(section: 0, item: 0), item: Item(id: "z"))]),
        ]
        for items in halfway {
            live = try Self.mirror()
            let changeset = Changeset(from: Self.start, to: Self.next, items: items)
            #expect(throws: FeedError.self) { try live.apply(.changes(changeset)) }
            #expect(live.version == nil)
            #expect(live.sections == before, "\(items)")
            #expect(live.itemCount(inSection: 0) == 2)
            #expect(live.contains(itemID: "a") && live.contains(itemID: "b"))
            #expect(!live.contains(itemID: "c") && !live.contains(itemID: "x"))
        }
        // The next reset is taken as usual.
        let sections = [Section(id: "s", items: [Item(id: "c")])]
        try live.apply(.reset(Snapshot(name: "c", version: Self.next, sections: sections)))
        #expect(live.sections == sections)
        #expect(live.contains(itemID: "c") && !live.contains(itemID: "a"))
    }
}
