import Testing

@testable import Model

/// Logs too long to follow change by change fall back to a full diff of the rebuilt old state: in `apply` for a
/// large batch, and in `changes(since:)` across a replacement or many versions.
@Suite struct FallbackTests {
    @Test func largeBatchFallsBackAndStillApplies() throws {
        var random = RandomContent(seed: 99)
        let old = [Section(id: "s", items: random.items(300)), Section(id: "t", items: random.items(300))]
        var collection = try VersionedCollection(epoch: "e", sections: old)
        var ops: [Op] = []
        for n in 0..<1_200 {
            let section = n % 2 == 0 ? "s" : "t"
            ops.append(.insertItems(at: ItemPosition(section: .id(section), index: n % 7), items: [Item(id: "n\(n)")]))
            if n % 3 == 0 { ops.append(.moveItem(.id("n\(n)"), to: ItemPosition(section: .id("s"), index: n % 11))) }
        }
        let log = try { () throws(ModelError) -> [Change] in
            var editor = Editor(store: Store(validated: old))
            for op in ops { try editor.apply(op) }
            return editor.log
        }()
        #expect(log.count * 1_200 > LogDelta.budget(itemCount: 2_000), "the batch must exceed the walk budget")
        let changeset = try collection.apply(ops)
        verify(changeset, from: old, to: collection.snapshot(), "large batch")
    }

    @Test func coalescingAcrossReplacementsAndManyVersions() throws {
        var random = RandomContent(seed: 7)
        let first = random.sections()
        var collection = try VersionedCollection(epoch: "e", sections: first)
        var states: [UInt64: [Section]] = [1: first]
        for round in 0..<60 {
            if round % 20 == 10 {
                _ = try collection.replace(with: random.edited(collection.snapshot()))
            } else {
                _ = try? collection.apply((0..<3).map { _ in random.op(on: collection.snapshot()) })
            }
            states[collection.version.seq] = collection.snapshot()
        }
        for (seq, state) in states {
            let changeset = try #require(collection.changes(since: Version(epoch: "e", seq: seq)))
            verify(changeset, from: state, to: collection.snapshot(), "coalesce since \(seq)")
        }
    }
}
