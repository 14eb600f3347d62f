import Testing

@testable import Model

/// Logs too long to follow change by change fall back to a full diff of the rebuilt old state: in `apply` for a
/// large batch, and in `changes(since:)` across a replacement. Each test asserts which way its changesets were
/// built, so that a fallback that stops happening (or starts happening everywhere) fails here.
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
        let (changeset, built) = try routes { try collection.apply(ops) }
        #expect(built == [.fullDiff], "a batch beyond the walk budget is diffed in full")
        verify(changeset, from: old, to: collection.snapshot(), "large batch")
    }

    @Test func smallBatchFollowsTheLog() throws {
        var random = RandomContent(seed: 5)
        let old = [Section(id: "s", items: random.items(300))]
        var collection = try VersionedCollection(epoch: "e", sections: old)
        let ops: [Op] = [
            .moveItem(.path(.index(0), 0), to: ItemPosition(section: .index(0), index: 200)),
            .insertItems(at: ItemPosition(section: .index(0), index: 7), items: [Item(id: "new")]),
        ]
        let (changeset, built) = try routes { try collection.apply(ops) }
        #expect(built == [.log])
        verify(changeset, from: old, to: collection.snapshot(), "small batch")
    }

    @Test func coalescingAcrossReplacementsAndManyVersions() throws {
        var random = RandomContent(seed: 7)
        let first = random.sections()
        var collection = try VersionedCollection(epoch: "e", sections: first)
        var states: [UInt64: [Section]] = [1: first]
        var replacedAt: [UInt64] = []
        for round in 0..<60 {
            if round % 20 == 10 {
                let before = collection.version
                _ = try collection.replace(with: random.edited(collection.snapshot()))
                if collection.version != before { replacedAt.append(collection.version.seq) }
            } else {
                _ = try? collection.apply((0..<3).map { _ in random.op(on: collection.snapshot()) })
            }
            states[collection.version.seq] = collection.snapshot()
        }
        #expect(states.count >= 30, "only \(states.count) versions committed")
        #expect(replacedAt.count == 3)
        for (seq, state) in states {
            let (changeset, built) = routes { collection.changes(since: Version(epoch: "e", seq: seq)) }
            let expected: [Coalescing.Route] =
                seq == collection.version.seq ? [] : replacedAt.contains { $0 > seq } ? [.fullDiff] : [.log]
            #expect(built == expected, "coalesce since \(seq)")
            verify(try #require(changeset), from: state, to: collection.snapshot(), "coalesce since \(seq)")
        }
    }
}
