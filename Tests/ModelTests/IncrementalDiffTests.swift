import Testing

@testable import Model

/// Changesets computed from the change log (touched elements only) on larger sequences, where untouched runs
/// matter: several moves in one batch, sometimes in a pattern where moving the untouched elements is cheaper.
/// Random loops count the batches they checked (see `ChangesetPropertyTests`).
@Suite struct IncrementalDiffTests {
    @Test func batchesOfMovesInALongSectionMoveMinimally() throws {
        var applied = 0
        for seed in UInt64(0)..<300 {
            var random = RandomContent(seed: seed)
            let count = random.int(1...60)
            let old = [Section(id: "s", items: random.items(count)), Section(id: "t", items: random.items(3))]
            var collection = try VersionedCollection(epoch: "e", sections: old)
            let ops: [Op] = (0..<random.int(1...8)).map { _ in
                let section = random.chance(10) ? 1 : 0
                let upper = collection.snapshot()[section].items.count - (section == 0 ? 1 : 0)
                return .moveItem(
                    .path(.index(0), random.int(0...count - 1)),
                    to: ItemPosition(section: .index(section), index: random.int(0...upper)))
            }
            do {
                let changeset = try collection.apply(ops)
                verify(changeset, from: old, to: collection.snapshot(), "moves seed \(seed) \(ops)")
                applied += 1
            } catch {}
        }
        #expect(applied >= 150, "only \(applied) of 300 batches of moves applied")
    }

    /// k1 k2 k3 u: moving k1, k2, k3 in turn to the end gives u k1 k2 k3, which is ONE move of the untouched u.
    @Test func anUntouchedRunMovesWhenThatIsCheaper() throws {
        let old = sections("s: k1 k2 k3 u")
        var collection = try VersionedCollection(epoch: "e", sections: old)
        let changeset = try collection.apply(
            ["k1", "k2", "k3"].map { .moveItem(.id($0), to: ItemPosition(section: .index(0), index: 3)) })
        #expect(collection.snapshot() == sections("s: u k1 k2 k3"))
        #expect(changeset.items == ItemChanges(moved: [ItemMove(from: path(0, 3), to: path(0, 0), id: "u")]))
    }

    /// The same with sections: the untouched section u moves, the three touched ones stay.
    @Test func anUntouchedSectionMovesWhenThatIsCheaper() throws {
        let old = sections("k1: a", "k2:", "k3: b c", "u: d")
        var collection = try VersionedCollection(epoch: "e", sections: old)
        let changeset = try collection.apply(["k1", "k2", "k3"].map { .moveSection(.id($0), to: 3) })
        #expect(collection.snapshot() == sections("u: d", "k1: a", "k2:", "k3: b c"))
        #expect(changeset.sections == SectionChanges(moved: [SectionMove(from: 3, to: 0, id: "u")]))
        #expect(changeset.items.isEmpty)
    }

    /// Deleting a large section follows the log (its items need no walking), and an item that moved into it
    /// from a live section is still deleted where it was.
    @Test func deletingALargeSectionFollowsTheLog() throws {
        let old = [
            Section(id: "big", items: (0..<5_000).map { Item(id: "i\($0)") }), Section(id: "a", items: [Item(id: "y")]),
        ]
        let ops: [Op] = [
            .moveItem(.id("y"), to: ItemPosition(section: .id("big"), index: 10)), .deleteSections([.id("big")]),
        ]
        var editor = Editor(store: Store(validated: old))
        for op in ops { try editor.apply(op) }
        #expect(LogDelta.delta(for: editor.log, in: editor.store) != nil)
        var collection = try VersionedCollection(epoch: "e", sections: old)
        let changeset = try collection.apply(ops)
        verify(changeset, from: old, to: collection.snapshot(), "large section deletion")
        #expect(changeset.sections == SectionChanges(deleted: [SectionDeletion(index: 0, id: "big")]))
        #expect(changeset.items == ItemChanges(deleted: [ItemDeletion(at: path(1, 0), id: "y")]))
    }

    /// Inserting a large section follows the log too, also when an item then moves into it from a live section
    /// and another moves out of it.
    @Test func insertingALargeSectionFollowsTheLog() throws {
        let old = [Section(id: "a", items: [Item(id: "y"), Item(id: "z")])]
        let ops: [Op] = [
            .insertSections(at: 0, sections: [Section(id: "big", items: (0..<5_000).map { Item(id: "i\($0)") })]),
            .moveItem(.id("y"), to: ItemPosition(section: .id("big"), index: 10)),
            .moveItem(.id("i7"), to: ItemPosition(section: .id("a"), index: 0)),
        ]
        var editor = Editor(store: Store(validated: old))
        for op in ops { try editor.apply(op) }
        #expect(LogDelta.delta(for: editor.log, in: editor.store) != nil)
        var collection = try VersionedCollection(epoch: "e", sections: old)
        let changeset = try collection.apply(ops)
        verify(changeset, from: old, to: collection.snapshot(), "large section insertion")
        #expect(changeset.sections.inserted.map(\.index) == [0])
        #expect(changeset.items.deleted == [ItemDeletion(at: path(0, 0), id: "y")])
        #expect(changeset.items.inserted.map(\.item.id) == ["i7"])
    }

    @Test func manySectionMovesInOneBatchMoveMinimally() throws {
        var applied = 0
        for seed in UInt64(0)..<300 {
            var random = RandomContent(seed: seed)
            let old = (0..<random.int(1...30)).map { Section(id: "s\($0)", items: random.items(random.int(0...2))) }
            var collection = try VersionedCollection(epoch: "e", sections: old)
            let ops: [Op] = (0..<random.int(1...8)).map { _ in
                random.chance(20)
                    ? .moveItem(
                        .path(.index(random.int(0...old.count - 1)), 0),
                        to: ItemPosition(section: .index(random.int(0...old.count - 1)), index: 0))
                    : .moveSection(.index(random.int(0...old.count - 1)), to: random.int(0...old.count - 1))
            }
            do {
                let changeset = try collection.apply(ops)
                verify(changeset, from: old, to: collection.snapshot(), "section moves seed \(seed) \(ops)")
                applied += 1
            } catch {}
        }
        #expect(applied >= 120, "only \(applied) of 300 batches of section moves applied")
    }

    @Test func theLogAndTheFullDiffAgreeOnCounts() throws {
        var compared = 0
        for seed in UInt64(0)..<500 {
            var random = RandomContent(seed: seed)
            let old = random.sections()
            var editor = Editor(store: Store(validated: old))
            for _ in 0..<random.int(1...6) { try? editor.apply(random.op(on: editor.store.snapshot())) }
            let version = (Version(epoch: "e", seq: 1), Version(epoch: "e", seq: 2))
            let fromLog = Coalescing.changeset(for: editor.log, in: editor.store, from: version.0, to: version.1)
            let full = Coalescing.fullChangeset(for: editor.log, in: editor.store, from: version.0, to: version.1)
            verify(full, from: old, to: editor.store.snapshot(), "full seed \(seed)")
            #expect(fromLog.sections.moved.count == full.sections.moved.count, "seed \(seed)")
            #expect(fromLog.items.updated == full.items.updated, "seed \(seed)")
            #expect(fromLog.sections.updated == full.sections.updated, "seed \(seed)")
            if !full.isEmpty { compared += 1 }
        }
        #expect(compared >= 200, "only \(compared) of 500 logs changed something")
    }
}
