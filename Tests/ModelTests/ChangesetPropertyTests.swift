import Testing

@testable import Model

/// Seeded property tests: random states and random edits, op batches and histories; every changeset must be
/// accepted by the UIKit model, reproduce the new state and move minimally. Failures print their seed. Loops that
/// pass over rejected cases count what they checked and expect at least about half of what their fixed seeds give
/// today, so that a generator drifting into rejecting everything fails instead of passing vacuously.
@Suite struct ChangesetPropertyTests {
    @Test func randomReplacementsApply() throws {
        for seed in UInt64(0)..<3000 {
            var random = RandomContent(seed: seed)
            let old = random.sections()
            let new = random.edited(old)
            var collection = try VersionedCollection(epoch: "e", sections: old)
            let changeset = try collection.replace(with: new)
            verify(changeset, from: old, to: new, "replace seed \(seed)")
            #expect(collection.snapshot() == new, "seed \(seed)")
            #expect(changeset.isEmpty == (old == new), "seed \(seed)")
            #expect(collection.version.seq == (old == new ? 1 : 2), "seed \(seed)")
        }
    }

    @Test func randomOpBatchesApplyOrLeaveNothing() throws {
        var applied = 0
        var rejected = 0
        for seed in UInt64(0)..<3000 {
            var random = RandomContent(seed: seed)
            var collection = try VersionedCollection(epoch: "e", sections: random.sections())
            for round in 0..<4 {
                let old = collection.snapshot()
                let version = collection.version
                var ops: [Op] = []
                var preview = old
                for _ in 0..<random.int(1...5) {
                    let op = random.op(on: preview)
                    ops.append(op)
                    var scratch = Editor(store: Store(validated: preview))
                    if (try? scratch.apply(op)) != nil { preview = scratch.store.snapshot() }
                }
                let context = "ops seed \(seed) round \(round) \(ops)"
                do {
                    let changeset = try collection.apply(ops)
                    let new = collection.snapshot()
                    verify(changeset, from: old, to: new, context)
                    #expect(changeset.from == version, "\(context)")
                    #expect(changeset.isEmpty == (old == new), "\(context)")
                    #expect(collection.version.seq == version.seq + (changeset.isEmpty ? 0 : 1), "\(context)")
                    #expect(changeset.to == collection.version, "\(context)")
                    if !changeset.isEmpty { applied += 1 }
                } catch {
                    rejected += 1
                    #expect(collection.snapshot() == old, "\(context): a failed batch changed the state")
                    #expect(collection.version == version, "\(context)")
                    #expect(error.opIndex.map(ops.indices.contains) == true, "\(context)")
                }
            }
        }
        #expect(applied >= 3_000, "only \(applied) of 12000 batches changed something")
        #expect(rejected >= 2_500, "only \(rejected) of 12000 batches were rejected")
    }

    /// Both ways of building a changeset are exercised: from the log, and by the full diff (across a replacement,
    /// or from version 0).
    @Test func coalescedChangesetsFromEveryKeptVersionApply() throws {
        var coalesced = 0
        var fromLog = 0
        var fullDiffs = 0
        for seed in UInt64(0)..<400 {
            var random = RandomContent(seed: seed)
            let first = random.sections()
            var collection = try VersionedCollection(
                epoch: "e", sections: first, limits: HistoryLimits(versions: 12))
            var states: [UInt64: [Section]] = [0: [], 1: first]
            for _ in 0..<random.int(0...20) {
                if random.chance(15) {
                    _ = try collection.replace(with: random.edited(collection.snapshot()))
                } else {
                    let ops = (0..<random.int(1...4)).map { _ in random.op(on: collection.snapshot()) }
                    _ = try? collection.apply(ops)
                }
                states[collection.version.seq] = collection.snapshot()
            }
            let current = collection.version
            let now = collection.snapshot()
            for seq in 0...current.seq {
                let since = Version(epoch: "e", seq: seq)
                let kept = current.seq - seq <= 12
                let (answer, built) = routes { collection.changes(since: since) }
                guard let changeset = answer else {
                    #expect(!kept, "seed \(seed): version \(seq) should be kept")
                    continue
                }
                #expect(kept, "seed \(seed): version \(seq) should have expired")
                #expect(changeset.from == since && changeset.to == current, "seed \(seed)")
                let state = try #require(states[seq], "seed \(seed): no state at \(seq)")
                verify(changeset, from: state, to: now, "coalesce seed \(seed) since \(seq)")
                if current.seq - seq >= 2 { coalesced += 1 }
                fromLog += built.count { $0 == .log }
                fullDiffs += built.count { $0 == .fullDiff }
            }
        }
        #expect(coalesced >= 1_000, "only \(coalesced) changesets across two versions or more")
        #expect(fromLog >= 400, "only \(fromLog) changesets followed the log")
        #expect(fullDiffs >= 700, "only \(fullDiffs) changesets were full diffs")
    }

    /// Op batches on sections long enough to split and merge chunks, where most items stay untouched.
    @Test func opBatchesOnLongSectionsApply() throws {
        var applied = 0
        for seed in UInt64(0)..<60 {
            var random = RandomContent(seed: seed)
            let old = (0..<3).map { Section(id: "s\($0)", items: random.items(random.int(0...1_500))) }
            var collection = try VersionedCollection(epoch: "e", sections: old)
            for _ in 0..<5 {
                let before = collection.snapshot()
                let ops = (0..<random.int(1...6)).map { _ in random.op(on: before) }
                guard let changeset = try? collection.apply(ops) else { continue }
                applied += 1
                verify(changeset, from: before, to: collection.snapshot(), "long sections seed \(seed) \(ops)")
            }
            let changeset = try #require(collection.changes(since: Version(epoch: "e", seq: 1)))
            verify(changeset, from: old, to: collection.snapshot(), "long sections coalesced seed \(seed)")
        }
        #expect(applied >= 100, "only \(applied) of 300 batches applied")
    }
}
