import Testing

@testable import Model

/// A collection given a new epoch keeps its content and starts its versions over, so that no cursor of the old
/// epoch is taken for one of the new.
@Suite struct RenewedEpochTests {
    @Test func keepsTheContentAndStartsOverAtOne() throws {
        var collection = try VersionedCollection(
            epoch: "old", sections: sections("s: a"))
        _ = try collection.upsert(id: "b", data: json("2"), section: nil, index: nil)
        _ = try collection.upsert(id: "c", data: json("3"), section: nil, index: nil)
        let oldVersion = collection.version
        #expect(oldVersion.seq == 3)

        let renewed = collection.renewed(epoch: "new")
        #expect(renewed.version == Version(epoch: "new", seq: 1))
        #expect(renewed.snapshot() == collection.snapshot())
        // The old epoch's versions are unknown to it: a client that followed them starts over.
        #expect(renewed.changes(since: oldVersion) == nil)
        #expect(renewed.changes(since: Version(epoch: "old", seq: 1)) == nil)
        // From the new epoch's start, the whole content arrives as created.
        let fromStart = try #require(renewed.changes(since: Version(epoch: "new", seq: 0)))
        #expect(fromStart.sections.inserted.map(\.section.id) == ["s"])
        #expect(fromStart.sections.inserted.first?.section.items.map(\.id) == ["a", "b", "c"])
        #expect(renewed.changes(since: renewed.version)?.isEmpty == true)
    }

    @Test func writesAfterARenewalNumberFromTheNewEpoch() throws {
        var collection = try VersionedCollection(epoch: "old", sections: sections("s:"))
        _ = try collection.upsert(id: "a", data: .null, section: nil, index: nil)
        var renewed = collection.renewed(epoch: "new")
        let changes = try renewed.upsert(id: "b", data: .null, section: nil, index: nil).changeset
        #expect(renewed.version == Version(epoch: "new", seq: 2))
        #expect(changes.items.inserted.map(\.item.id) == ["b"])
        #expect(renewed.changes(since: Version(epoch: "new", seq: 1))?.items.inserted.map(\.item.id) == ["b"])
    }

    @Test func aViewKeepsItsContentUnderANewEpoch() throws {
        let source = try VersionedCollection(
            epoch: "src",
            sections: sections("s: a b"))
        let definition = try ViewDefinition(json: Array(#"{"source":"src"}"#.utf8))
        var view = LiveView(epoch: "old", definition: definition, source: source)
        let before = view.snapshot()
        view.renewEpoch("new")
        #expect(view.version == Version(epoch: "new", seq: 1))
        #expect(view.snapshot() == before)
        #expect(view.changes(since: Version(epoch: "old", seq: 1)) == nil)
    }
}
