import Testing

@testable import Model

/// Ids and keys that Swift's `String` finds equal (canonically equivalent) but whose bytes differ are different
/// ids, as the contract compares them: "é" as U+00E9 and as "e" + U+0301, "Å" as U+00C5 and as "A" + U+030A.
/// Each case here once merged the two (a trap in a view, a section deleted or moved in the wrong place, a false
/// `duplicate_id`).
@Suite struct ExactIDTests {
    static let composed = "\u{E9}"
    static let decomposed = "e\u{301}"
    static let ring = "\u{C5}"
    static let ringDecomposed = "A\u{30A}"

    /// The ids' bytes, which `[String] ==` would not tell apart.
    static func bytes(_ ids: [String]) -> [[UInt8]] { ids.map { Array($0.utf8) } }

    @Test func equivalentStringsAreDifferentExactStrings() {
        #expect(Self.composed == Self.decomposed, "Swift's String equality, which this suite guards against")
        #expect(!Self.composed.hasSameBytes(as: Self.decomposed))
        #expect(Self.composed.hasSameBytes(as: "\u{E9}"))
        #expect(ExactString(Self.composed) != ExactString(Self.decomposed))
        #expect(Set([ExactString(Self.composed), ExactString(Self.decomposed)]).count == 2)
        #expect(Item(id: Self.composed) != Item(id: Self.decomposed))
        #expect(Section(id: Self.ring) != Section(id: Self.ringDecomposed))
    }

    @Test func moveSectionBetweenEquivalentIDsCommitsAVersion() throws {
        let old = [
            Section(id: Self.ring, items: [Item(id: "a")]), Section(id: Self.ringDecomposed, items: [Item(id: "b")]),
        ]
        var collection = try VersionedCollection(epoch: "e", sections: old)
        let changeset = try collection.apply([.moveSection(.index(0), to: 1)])
        #expect(changeset.sections.moved.count == 1)
        #expect(changeset.from != changeset.to)
        #expect(Self.bytes(collection.snapshot().map(\.id)) == Self.bytes([Self.ringDecomposed, Self.ring]))
        verify(changeset, from: old, to: collection.snapshot(), "move")
    }

    @Test func deleteSectionsByIDDeletesThatOne() throws {
        let old = [
            Section(id: Self.ring, items: [Item(id: "a")]), Section(id: Self.ringDecomposed, items: [Item(id: "b")]),
        ]
        var collection = try VersionedCollection(epoch: "e", sections: old)
        let changeset = try collection.apply([.deleteSections([.id(Self.ring)])])
        #expect(changeset.sections.deleted.map(\.index) == [0])
        #expect(Self.bytes(collection.snapshot().map(\.id)) == Self.bytes([Self.ringDecomposed]))
        verify(changeset, from: old, to: collection.snapshot(), "delete")
        _ = try collection.apply([.updateSection(.id(Self.ringDecomposed), data: json("1"))])
        #expect(collection.snapshot().first?.data == json("1"))
    }

    @Test func equivalentNewIDsInOneOpAreNotDuplicates() throws {
        var collection = try VersionedCollection(epoch: "e", sections: [Section(id: "s")])
        _ = try collection.apply([
            .insertItems(
                at: ItemPosition(section: .id("s"), index: 0), items: [Item(id: "\u{F1}"), Item(id: "n\u{303}")])
        ])
        _ = try collection.apply([.updateItems([Item(id: "\u{F1}", data: json("1")), Item(id: "n\u{303}")])])
        #expect(collection.item(id: "\u{F1}")?.item.data == json("1"))
        #expect(collection.item(id: "n\u{303}")?.item.data == .null)
        _ = try collection.apply([
            .insertSections(at: 1, sections: [Section(id: Self.ring), Section(id: Self.ringDecomposed)])
        ])
        #expect(collection.snapshot().count == 3)
    }

    @Test func replacingAroundEquivalentIDsGivesAMinimalChangeset() throws {
        let old = [Section(id: Self.ring), Section(id: "m"), Section(id: Self.ringDecomposed)]
        let new = [Section(id: Self.ringDecomposed), Section(id: "m"), Section(id: Self.ring)]
        _ = try replacing(old, with: new)
        _ = try replacing(
            sections("s: a b"), with: [Section(id: "s", items: [Item(id: Self.composed), Item(id: Self.decomposed)])])
    }

    @Test func aViewSectionsEquivalentKeysApart() throws {
        func task(_ id: String, _ key: String) -> Item { Item(id: id, data: json("{\"k\":\"\(key)\"}")) }
        var source = try VersionedCollection(
            epoch: "src",
            sections: [Section(id: "s", items: [task("a", Self.decomposed), task("b", "f"), task("c", Self.composed)])])
        let definition = try ViewDefinition(json: Array("{\"source\":\"src\",\"sectionBy\":{\"field\":\"/k\"}}".utf8))
        var view = LiveView(epoch: "v", definition: definition, source: source)
        #expect(view.snapshot().count == 3)

        let before = (source.version, view.snapshot())
        _ = try source.apply([
            .insertItems(at: ItemPosition(section: .index(0), index: 3), items: [task("d", Self.decomposed)])
        ])
        let delta = try #require(SourceDelta(source: source, since: before.0))
        let applied = view.apply(delta)
        let changeset = try #require(applied)
        verify(changeset, from: before.1, to: view.snapshot(), "insert into one of two equivalent sections")
        let sizes = view.snapshot().map { ($0.id.utf8.count, $0.items.count) }
        #expect(sizes.contains { $0 == ("\"\(Self.decomposed)\"".utf8.count, 2) })
    }

    /// A view filtering on one of two such fields and sorting by the other reads each from its own member (the
    /// two pointers once shared one field slot).
    @Test func aViewTellsEquivalentFieldsApart() throws {
        func task(_ id: String, _ first: Int, _ second: Int) -> Item {
            Item(id: id, data: json("{\"\(Self.composed)\":\(first),\"\(Self.decomposed)\":\(second)}"))
        }
        let source = try VersionedCollection(
            epoch: "src", sections: [Section(id: "s", items: [task("a", 1, 2), task("b", 1, 1), task("c", 0, 0)])])
        let text =
            "{\"source\":\"src\",\"filter\":{\"field\":\"/\(Self.composed)\",\"eq\":1},"
            + "\"sortBy\":[{\"field\":\"/\(Self.decomposed)\"}]}"
        let view = LiveView(epoch: "v", definition: try ViewDefinition(json: Array(text.utf8)), source: source)
        #expect(view.snapshot().first?.items.map(\.id) == ["b", "a"])
    }

    @Test func jsonObjectsKeepEquivalentMembersApart() throws {
        let text = "{\"\(Self.composed)\":1,\"\(Self.decomposed)\":2}"
        let value = try JSON(parsing: Array(text.utf8))
        guard case .object(let members) = value else {
            Issue.record("not an object")
            return
        }
        #expect(members.count == 2)
        #expect(members[ExactString(Self.decomposed)] == .number("2"))
        #expect(try #require(JSONPointer("/\(Self.composed)")).evaluate(in: value) == .number("1"))
        #expect(JSON.string(Self.composed) != JSON.string(Self.decomposed))
        let pointers = try ["/\(Self.composed)", "/\(Self.decomposed)"].map { try #require(JSONPointer($0)) }
        #expect(pointers[0] != pointers[1] && Set(pointers).count == 2)
        #expect(pointers[1].evaluate(in: value) == .number("2"))
        #expect(Set([JSON.string(Self.composed), .string(Self.decomposed), .string("\u{E9}")]).count == 2)
        #expect(throws: JSON.ParseError.self) { try JSON(parsing: Array("{\"\(Self.composed)\":1,\"\u{E9}\":2}".utf8)) }
    }
}
