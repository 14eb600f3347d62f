import Testing

@testable import Model

/// A source large enough to be filtered in parts on several threads (`LiveView.filter`), with free item slots
/// and items whose slots are not in the content's order, and a view large enough to be rebuilt on two threads
/// (`LiveView.derive`, `VersionedCollection.replace`): the view is what the naive evaluation gives.
@Suite struct ViewMaintenanceLargeSourceTests {
    static func item(_ number: Int) -> Item {
        Item(
            id: "i\(number)",
            data: json("{\"done\":\(number % 3 == 0),\"priority\":\(number % 97),\"status\":\"s\(number % 5)\"}"))
    }

    @Test func aLargeSourceIsFilteredInPartsAsAWhole() throws {
        let count = LiveView.partedFilterMinimum + 12_000
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

        // A new sort order over the whole view: the members, the index and the content are all rebuilt.
        let ascending =
            "{\"source\":\"src\",\"filter\":{\"field\":\"/done\",\"eq\":false},\"sectionBy\":{\"field\":\"/status\"},"
            + "\"sortBy\":[{\"field\":\"/priority\"}]}"
        let reversed = try ViewDefinition(json: Array(ascending.utf8))
        let limitedContent = view.snapshot()
        let resorted = view.redefine(reversed, source: source)
        let resortedContent = NaiveView.content(reversed, source: source.snapshot())
        #expect(view.snapshot() == resortedContent)
        #expect(resortedContent.reduce(0) { $0 + $1.items.count } >= VersionedCollection.concurrentReplaceMinimum)
        verify(resorted, from: limitedContent, to: resortedContent, "re-sorted")
        #expect(view.members.count == view.index.count)

        // The rebuilt members and index are kept up to date by the next change.
        let moved = Item(id: "i1", data: json("{\"done\":false,\"priority\":200,\"status\":\"s4\"}"))
        let since = source.version
        _ = try source.apply([.updateItems([moved])])
        let delta = try #require(SourceDelta(source: source, since: since))
        let applied = view.apply(delta)
        let updated = try #require(applied)
        let final = NaiveView.content(reversed, source: source.snapshot())
        #expect(view.snapshot() == final)
        verify(updated, from: resortedContent, to: final, "updated after the re-sort")
    }
}
