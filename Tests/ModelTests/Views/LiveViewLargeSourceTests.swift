import Testing

@testable import Model

/// A source large enough to be filtered in parts on several threads (`LiveView.filter`), with free item slots
/// and items whose slots are not in the content's order: the view is what the naive evaluation gives.
@Suite struct LiveViewLargeSourceTests {
    static func item(_ number: Int) -> Item {
        Item(
            id: "i\(number)",
            data: json("{\"done\":\(number % 3 == 0),\"priority\":\(number % 97),\"status\":\"s\(number % 5)\"}"))
    }

    @Test func aLargeSourceIsFilteredInPartsAsAWhole() throws {
        let count = LiveView.partedFilterMinimum + 4_000
        var source = try VersionedCollection(
            epoch: "src",
            sections: [
                Section(id: "a", items: (0..<(count / 2)).map(Self.item)),
                Section(id: "b", items: ((count / 2)..<count).map(Self.item)),
            ])
        // Free slots in every part, then new items in them, put at the front of the first section.
        _ = try source.apply([.deleteItems(stride(from: 0, to: count, by: 7).map { .id("i\($0)") })])
        let added = (count..<(count + 1_500)).map(Self.item)
        _ = try source.apply([.insertItems(at: .init(section: .index(0), index: 0), items: added)])
        #expect(source.store.itemSlotCount >= LiveView.partedFilterMinimum)

        let text =
            "{\"source\":\"src\",\"filter\":{\"field\":\"/done\",\"eq\":false},\"sectionBy\":{\"field\":\"/status\"},"
            + "\"sortBy\":[{\"field\":\"/priority\",\"order\":\"desc\"}]}"
        let definition = try ViewDefinition(json: Array(text.utf8))
        var view = LiveView(epoch: "v", definition: definition, source: source)
        let expected = NaiveView.content(definition, source: source.snapshot())
        #expect(view.snapshot() == expected)
        #expect(expected.reduce(0) { $0 + $1.items.count } > LiveView.partedFilterMinimum / 2)
        #expect(view.members.count == expected.reduce(0) { $0 + $1.items.count })
        #expect(view.index.count == view.members.count)

        let limited = try ViewDefinition(json: Array((String(text.dropLast()) + ",\"limit\":1000}").utf8))
        let changeset = view.redefine(limited, source: source)
        #expect(view.snapshot() == NaiveView.content(limited, source: source.snapshot()))
        verify(changeset, from: expected, to: view.snapshot(), "redefined with a limit")
    }
}
