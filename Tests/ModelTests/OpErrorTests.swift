import Testing

@testable import Model

/// Every op's error cases: each is a typed error carrying the op's index, never a trap, and leaves the
/// collection untouched. The fixture: s0 [a b c], s1 [d], s2 [].
@Suite struct OpErrorTests {
    static let long = String(repeating: "x", count: maximumIDByteCount + 1)
    static let extremes = [Int.min, -1, 3, Int.max]

    static let cases: [(Op, ModelError.Code)] =
        extremes.map { (.insertSections(at: $0 == 3 ? 4 : $0, sections: []), .indexOutOfRange) }
        + [
            (.insertSections(at: 0, sections: [Section(id: "s1")]), .duplicateID),
            (.insertSections(at: 0, sections: [Section(id: "n"), Section(id: "n")]), .duplicateID),
            (.insertSections(at: 0, sections: [Section(id: "")]), .invalidID),
            (.insertSections(at: 0, sections: [Section(id: long)]), .invalidID),
            (.insertSections(at: 0, sections: [Section(id: "n", items: [Item(id: "a")])]), .duplicateID),
            (.insertSections(at: 0, sections: [Section(id: "n", items: [Item(id: "")])]), .invalidID),
            (
                .insertSections(
                    at: 0,
                    sections: [Section(id: "n", items: [Item(id: "z")]), Section(id: "m", items: [Item(id: "z")])]),
                .duplicateID
            ),
            (.deleteSections([.index(0), .id("s0")]), .duplicateReference),
            (.deleteSections([.id("nope")]), .sectionNotFound),
            (.deleteSections([.id("")]), .invalidID),
            (.deleteSections([.id(long)]), .invalidID),
            (.moveSection(.id("nope"), to: 0), .sectionNotFound),
            (.updateSection(.id("nope"), data: .null), .sectionNotFound),
            (.insertItems(at: ItemPosition(section: .id("nope"), index: 0), items: []), .sectionNotFound),
            (.insertItems(at: ItemPosition(section: .index(0), index: 0), items: [Item(id: "d")]), .duplicateID),
            (
                .insertItems(at: ItemPosition(section: .index(0), index: 0), items: [Item(id: "n"), Item(id: "n")]),
                .duplicateID
            ),
            (
                .insertItems(at: ItemPosition(section: .index(0), index: 0), items: [Item(id: "n"), Item(id: "a")]),
                .duplicateID
            ),
            (
                .insertItems(
                    at: ItemPosition(section: .index(0), index: 0),
                    items: [Item(id: "n"), Item(id: "m"), Item(id: "n")]),
                .duplicateID
            ),
            (
                .insertItems(
                    at: ItemPosition(section: .index(0), index: 0),
                    items: [Item(id: "n"), Item(id: "m"), Item(id: "m")]),
                .duplicateID
            ),
            (.insertItems(at: ItemPosition(section: .index(0), index: 0), items: [Item(id: long)]), .invalidID),
            (.deleteItems([.id("a"), .path(.index(0), 0)]), .duplicateReference),
            (.deleteItems([.id("nope")]), .itemNotFound),
            (.deleteItems([.id("")]), .invalidID),
            (.deleteItems([.path(.id("nope"), 0)]), .sectionNotFound),
            (.moveItem(.id("nope"), to: ItemPosition(section: .index(0), index: 0)), .itemNotFound),
            (.moveItem(.id("a"), to: ItemPosition(section: .id("nope"), index: 0)), .sectionNotFound),
            (.updateItems([Item(id: "nope")]), .itemNotFound),
            (.updateItems([Item(id: "a"), Item(id: "a", data: json("1"))]), .duplicateReference),
            (.updateItems([Item(id: "")]), .invalidID),
        ]
        + extremes.flatMap { index -> [(Op, ModelError.Code)] in
            [
                (.deleteSections([.index(index)]), .indexOutOfRange),
                (.moveSection(.index(index), to: 0), .indexOutOfRange),
                (.moveSection(.index(0), to: index), .indexOutOfRange),
                (.updateSection(.index(index), data: .null), .indexOutOfRange),
                (.insertItems(at: ItemPosition(section: .index(index), index: 0), items: []), .indexOutOfRange),
                (
                    .insertItems(at: ItemPosition(section: .index(0), index: index == 3 ? 4 : index), items: []),
                    .indexOutOfRange
                ),
                (.deleteItems([.path(.index(index), 0)]), .indexOutOfRange),
                (.deleteItems([.path(.index(0), index)]), .indexOutOfRange),
                (.moveItem(.path(.index(0), index), to: ItemPosition(section: .index(0), index: 0)), .indexOutOfRange),
                // Within its own section an item can go to 0..<count; into another section, to 0...count.
                (.moveItem(.id("a"), to: ItemPosition(section: .index(0), index: index)), .indexOutOfRange),
                (
                    .moveItem(.id("a"), to: ItemPosition(section: .index(1), index: index == 3 ? 2 : index)),
                    .indexOutOfRange
                ),
            ]
        }

    @Test(arguments: cases.indices)
    func opIsRejected(_ index: Int) throws {
        let (op, code) = Self.cases[index]
        var collection = try VersionedCollection(epoch: "e", sections: sections("s0: a b c", "s1: d", "s2:"))
        let before = collection.snapshot()
        let valid = Op.updateSection(.index(2), data: json("1"))
        #expect(throws: ModelError.self) { try collection.apply([valid, op]) }
        do {
            _ = try collection.apply([valid, op])
        } catch {
            #expect(error.code == code, "\(op): \(error)")
            #expect(error.opIndex == 1)
        }
        #expect(collection.snapshot() == before)
        #expect(collection.version.seq == 1)
    }

    @Test func boundaryIndicesAreAccepted() throws {
        var collection = try VersionedCollection(epoch: "e", sections: sections("s0: a b c", "s1: d", "s2:"))
        _ = try collection.apply([
            .moveItem(.id("a"), to: ItemPosition(section: .index(0), index: 2)),
            .moveItem(.id("d"), to: ItemPosition(section: .index(0), index: 3)),
            .insertItems(at: ItemPosition(section: .index(2), index: 0), items: [Item(id: "e")]),
            .insertSections(at: 3, sections: [Section(id: "s3")]),
            .moveSection(.index(0), to: 3),
        ])
        #expect(collection.snapshot() == sections("s1:", "s2: e", "s3:", "s0: b c a d"))
    }

    /// Messages name references and ids as a request writes them (`[0, 0]`, `"a"`, JSON escapes), not as Swift
    /// prints its values (`path(Model.SectionRef.index(0), 0)`, `\u{1}`).
    @Test(arguments: [
        (Op.deleteItems([.path(.index(0), 0), .path(.index(0), 0)]), "item [0, 0] is named twice"),
        (.deleteItems([.id("a"), .path(.id("s0"), 0)]), #"item ["s0", 0] is named twice"#),
        (.deleteSections([.id("s1"), .index(1)]), "section 1 is named twice"),
        (.deleteSections([.id("s1"), .id("s1")]), #"section "s1" is named twice"#),
        (.deleteItems([.id("n\u{1}\"")]), #"no item with id "n\u0001\"""#),
    ])
    func messagesNameWhatTheRequestWrote(_ op: Op, _ message: String) throws {
        var collection = try VersionedCollection(epoch: "e", sections: sections("s0: a b c", "s1: d", "s2:"))
        let error = #expect(throws: ModelError.self) { try collection.apply([op]) }
        #expect(error?.message == message)
    }

    @Test func referencesOfOneOpSeeTheStateBeforeIt() throws {
        var collection = try VersionedCollection(epoch: "e", sections: sections("s0: a b c", "s1: d"))
        _ = try collection.apply([.deleteItems([.path(.index(0), 1), .path(.index(0), 2)])])
        #expect(collection.snapshot() == sections("s0: a", "s1: d"))
        _ = try collection.apply([.deleteSections([.index(0), .id("s1")])])
        #expect(collection.snapshot().isEmpty && collection.itemCount == 0)
    }
}
