import Model
import Testing

@testable import ChangeFeedClient

/// The mirror tells ids apart by their bytes, as the server does: "ñ" as U+00F1 and as "n" + U+0303 are two
/// items, though Swift's `String` finds them equal (the mirror once refused such a snapshot as a duplicate).
@Suite struct MirrorExactIDTests {
    @Test func equivalentIDsAreMirroredApart() throws {
        let sections = [
            Section(id: "\u{C5}", items: [Item(id: "\u{F1}"), Item(id: "n\u{303}")]),
            Section(id: "A\u{30A}", items: [Item(id: "x")]),
        ]
        var source = try VersionedCollection(epoch: "e", sections: sections)
        var live = LiveCollection()
        try live.apply(.reset(Snapshot(name: "c", version: source.version, sections: source.snapshot())))
        #expect(live.sections == source.snapshot())

        let steps: [[Op]] = [
            [.moveSection(.index(0), to: 1)],
            [.deleteItems([.id("n\u{303}")]), .updateItems([Item(id: "\u{F1}", data: JSONData(canonical: "1"))])],
            [.insertItems(at: ItemPosition(section: .id("A\u{30A}"), index: 0), items: [Item(id: "n\u{303}")])],
        ]
        for ops in steps {
            try live.apply(.changes(try source.apply(ops)))
            #expect(live.sections == source.snapshot())
        }
        #expect(live.sections.map { Array($0.id.utf8) } == [Array("A\u{30A}".utf8), Array("\u{C5}".utf8)])
        #expect(live.indexPath(ofItem: "n\u{303}") == [0, 0] && live.indexPath(ofItem: "x") == [0, 1])
        #expect(live.indexPath(ofItem: "\u{F1}") == [1, 0])
        #expect(live.indexPath(ofItem: "n") == nil && !live.contains(itemID: "n") && live.contains(itemID: "x"))
    }

    /// Found past the first chunk of a long section, and after the sections before it.
    @Test func itemsAreFoundByID() throws {
        let long = Section(id: "long", items: (0..<300).map { Item(id: "i\($0)") })
        let live = try LiveCollection(
            Snapshot(name: "c", version: Version(epoch: "e", seq: 1), sections: [Section(id: "empty"), long]))
        for k in [0, 63, 64, 200, 299] { #expect(live.indexPath(ofItem: "i\(k)") == [1, k]) }
        #expect(live.indexPath(ofItem: "i300") == nil)
    }
}
