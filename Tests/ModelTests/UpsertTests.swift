import Testing

@testable import Model

@Suite struct UpsertTests {
    func fixture() throws -> VersionedCollection {
        try VersionedCollection(epoch: "e", sections: sections("s0: a b", "s1: c"))
    }

    /// Upserts, checks the result, and checks that replaying the returned ops gives the same state.
    func upsert(
        _ collection: inout VersionedCollection, _ id: String, _ data: JSONData = json("1"), section: SectionRef? = nil,
        index: Int? = nil
    ) throws -> (created: Bool, snapshot: [Section]) {
        var replay = collection
        let old = collection.snapshot()
        let result = try collection.upsert(id: id, data: data, section: section, index: index)
        verify(result.changeset, from: old, to: collection.snapshot(), "upsert \(id)")
        _ = try replay.apply(result.ops)
        #expect(replay.snapshot() == collection.snapshot())
        return (result.created, collection.snapshot())
    }

    @Test func existingItemGetsNewDataAndStays() throws {
        var collection = try fixture()
        let result = try upsert(&collection, "a")
        #expect(!result.created)
        #expect(collection.item(id: "a")! == (Item(id: "a", data: json("1")), path(0, 0)))
    }

    @Test func existingItemMoves() throws {
        var collection = try fixture()
        _ = try upsert(&collection, "a", section: .id("s1"))
        #expect(collection.item(id: "a")?.at == path(1, 1))
        _ = try upsert(&collection, "a", index: 0)
        #expect(collection.item(id: "a")?.at == path(1, 0))
        _ = try upsert(&collection, "a", section: .index(1))
        #expect(collection.item(id: "a")?.at == path(1, 1))
        _ = try upsert(&collection, "a", section: .index(0), index: 1)
        #expect(collection.snapshot().map { $0.items.map(\.id) } == [["b", "a"], ["c"]])
    }

    @Test func newItemGoesToTheEndOfTheLastSectionByDefault() throws {
        var collection = try fixture()
        #expect(try upsert(&collection, "n").created)
        #expect(collection.item(id: "n")?.at == path(1, 1))
        _ = try upsert(&collection, "m", section: .id("s0"), index: 0)
        #expect(collection.item(id: "m")?.at == path(0, 0))
    }

    @Test func newItemInAnEmptyCollectionGetsADefaultSection() throws {
        var collection = try VersionedCollection(epoch: "e", sections: [])
        _ = try upsert(&collection, "n")
        #expect(collection.snapshot() == [Section(id: "default", items: [Item(id: "n", data: json("1"))])])
    }

    /// A client that read "a collection with no section gets one with id `default`" and names it gets what leaving
    /// it out gives; any other section of an empty collection is still not found.
    @Test func namingTheDefaultSectionOfAnEmptyCollectionCreatesIt() throws {
        var collection = try VersionedCollection(epoch: "e", sections: [])
        #expect(throws: ModelError.self) {
            try collection.upsert(id: "n", data: .null, section: .id("other"), index: nil)
        }
        #expect(throws: ModelError.self) { try collection.upsert(id: "n", data: .null, section: .index(0), index: nil) }
        _ = try upsert(&collection, "n", section: .id("default"))
        _ = try upsert(&collection, "m", section: .id("default"), index: 0)
        #expect(collection.snapshot().map { $0.items.map(\.id) } == [["m", "n"]])
        #expect(collection.snapshot().map(\.id) == ["default"])
    }

    @Test func invalidUpsertsThrow() throws {
        var collection = try fixture()
        let before = collection.snapshot()
        let cases: [(String, SectionRef?, Int?, ModelError.Code)] = [
            ("", nil, nil, .invalidID), (String(repeating: "x", count: 257), nil, nil, .invalidID),
            ("a", .id("nope"), nil, .sectionNotFound), ("a", nil, 2, .indexOutOfRange),
            ("a", nil, Int.max, .indexOutOfRange),
            ("n", nil, -1, .indexOutOfRange), ("n", .index(Int.min), nil, .indexOutOfRange),
            ("n", .index(0), Int.max, .indexOutOfRange),
        ]
        for (id, section, index, code) in cases {
            #expect(throws: ModelError.self) {
                try collection.upsert(id: id, data: .null, section: section, index: index)
            }
            do {
                _ = try collection.upsert(id: id, data: .null, section: section, index: index)
            } catch {
                #expect(error.code == code, "\(id) \(String(describing: section)) \(String(describing: index))")
                #expect(error.opIndex == nil, "an upsert has no ops to point at")
            }
        }
        #expect(collection.snapshot() == before && collection.version.seq == 1)
        var empty = try VersionedCollection(epoch: "e", sections: [])
        // Its second op (after the "default" section's insertion) fails, yet the error names no op.
        let error = #expect(throws: ModelError.self) { try empty.upsert(id: "x", data: .null, section: nil, index: 5) }
        #expect(error?.code == .indexOutOfRange)
        #expect(error?.opIndex == nil)
    }
}
