import Testing

@testable import Model

/// `replay`, the journal's way of applying ops, must end where `apply` ends: content, version and history.
@Suite struct ReplayTests {
    /// 300 seeds of six batches each; some seeds draw only rejected batches, so the accepted ones are counted
    /// over all of them (about 1,100 today).
    @Test func replayMatchesApply() throws {
        var accepted = 0
        for seed in UInt64(0)..<300 { accepted += try Self.replayMatchesApply(seed: seed) }
        #expect(accepted >= 500, "only \(accepted) of 1,800 batches were accepted")
    }

    /// Applies and replays six random batches from `seed`, expecting the same outcome of each; returns how many
    /// were accepted.
    static func replayMatchesApply(seed: UInt64) throws -> Int {
        var random = RandomContent(seed: seed)
        var applied = try VersionedCollection(epoch: "e", sections: random.sections())
        var replayed = applied
        var accepted = 0
        for _ in 0..<6 {
            let snapshot = applied.snapshot()
            let ops = (0..<random.int(1...4)).map { _ in random.op(on: snapshot) }
            let appliedError: ModelError?
            do throws(ModelError) {
                _ = try applied.apply(ops)
                appliedError = nil
                accepted += 1
            } catch {
                appliedError = error
            }
            do throws(ModelError) {
                try replayed.replay(ops)
                #expect(appliedError == nil, "seed \(seed): replay accepted what apply rejected")
            } catch {
                #expect(error == appliedError, "seed \(seed)")
            }
            #expect(replayed.version == applied.version, "seed \(seed)")
            #expect(replayed.snapshot() == applied.snapshot(), "seed \(seed)")
        }
        for seq in 0...applied.version.seq {
            let since = Version(epoch: "e", seq: seq)
            #expect(replayed.changes(since: since) == applied.changes(since: since), "seed \(seed), since \(since)")
        }
        return accepted
    }

    @Test func insertingIntoAnExistingSectionNeedsNoChangesetButCommits() throws {
        var collection = try VersionedCollection(epoch: "e", sections: [Section(id: "s")])
        try collection.replay([.insertItems(at: ItemPosition(section: .index(0), index: 0), items: [Item(id: "a")])])
        #expect(collection.version == Version(epoch: "e", seq: 2))
        try collection.replay([
            .insertItems(at: ItemPosition(section: .index(0), index: 1), items: [Item(id: "b")]),
            .deleteItems([.id("b")]),
        ])
        #expect(collection.version == Version(epoch: "e", seq: 2), "an insert undone in the same batch commits nothing")
    }
}
