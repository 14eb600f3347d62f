import Testing

@testable import Model

/// Random sources under random op batches, `PUT` replacements, deletion and re-creation, seen through random
/// view definitions (and redefinitions): after every step the view equals the naive evaluation, every changeset,
/// single or coalesced from any kept version, passes the UIKit model with minimal moves, and a catch-up over one
/// step is that step's live changeset (moves included: API.md's "the same whichever server answers").
@Suite struct ViewMaintenancePropertyTests {
    /// What a run did, to assert that the loops really tested something.
    struct Counts {
        var batches = 0
        var replacements = 0
        var deletions = 0
        var creations = 0
        var redefinitions = 0
        var changesets = 0
        var coalesced = 0
    }

    @Test func viewsFollowTheirSources() throws {
        var counts = Counts()
        for seed in UInt64(1)...150 { try run(seed: seed, counts: &counts) }
        #expect(counts.batches >= 1_500, "\(counts)")
        #expect(counts.replacements >= 200 && counts.deletions >= 100 && counts.creations >= 100, "\(counts)")
        #expect(counts.redefinitions >= 200 && counts.changesets >= 1_500 && counts.coalesced >= 10_000, "\(counts)")
    }

    private func run(seed: UInt64, counts: inout Counts) throws {
        var random = RandomViews(seed: seed)
        var epochs = 0
        func newEpoch() -> String {
            epochs += 1
            return "src\(epochs)"
        }
        var source: VersionedCollection? = try VersionedCollection(epoch: newEpoch(), sections: random.content())
        var view = LiveView(epoch: "v", definition: random.definition(source: "tasks"), source: source)
        var seen = source?.version
        var kept: [(Version, [Section])] = [(Version(epoch: "v", seq: 0), []), (view.version, view.snapshot())]
        check(view, source, "seed \(seed) created")
        for step in 0..<30 {
            let context = "seed \(seed) step \(step)"
            let before = (view.version, view.snapshot())
            var changeset: Changeset?
            switch random.int(0...99) {
            case 0..<60 where source != nil:
                for _ in 0..<(random.chance(25) ? 2 : 1) {
                    let ops = random.ops(on: source?.snapshot() ?? [])
                    _ = try source?.apply(ops)
                    counts.batches += 1
                }
                guard let source, let since = seen, let delta = SourceDelta(source: source, since: since) else {
                    Issue.record("\(context): no delta from the source's history")
                    return
                }
                changeset = view.apply(delta)
            case 0..<72 where source != nil:
                let replacement = random.replacement(of: source?.snapshot() ?? [])
                _ = try source?.replace(with: replacement)
                counts.replacements += 1
                guard let source, let since = seen, let delta = SourceDelta(source: source, since: since) else {
                    Issue.record("\(context): no delta from the source's history")
                    return
                }
                changeset = view.apply(delta)
            case 0..<80 where source != nil:
                source = nil
                counts.deletions += 1
                changeset = view.apply(.deleted)
            case 0..<88:
                source = try VersionedCollection(epoch: newEpoch(), sections: random.content())
                counts.creations += 1
                changeset = source.map { view.apply(.created($0)) } ?? nil
            default:
                counts.redefinitions += 1
                let redefined = view.redefine(random.definition(source: "tasks"), source: source)
                // Another definition commits a version even with the same content (an empty changeset).
                changeset = redefined.from == redefined.to ? nil : redefined
            }
            seen = source?.version
            let now = view.snapshot()
            check(view, source, context)
            if let changeset {
                counts.changesets += 1
                #expect(changeset.from == before.0 && changeset.to == view.version, "\(context)")
                verify(changeset, from: before.1, to: now, context)
                let caughtUp = view.changes(since: before.0)
                #expect(
                    caughtUp == changeset, "\(context): live \(changeset), caught up \(String(describing: caughtUp))")
                kept.append((view.version, now))
            } else {
                #expect(view.version == before.0 && now == before.1, "\(context): unchanged view, new version")
            }
            for (version, content) in kept {
                guard let coalesced = view.changes(since: version) else {
                    Issue.record("\(context): no changes since \(version)")
                    continue
                }
                counts.coalesced += 1
                verify(coalesced, from: content, to: now, "\(context) since \(version)")
            }
        }
        try checkRestore(view, source, "seed \(seed) restore")
    }

    private func check(_ view: LiveView, _ source: VersionedCollection?, _ context: String) {
        let expected = NaiveView.content(view.definition, source: source?.snapshot())
        #expect(view.snapshot() == expected, "\(context): \(view.definition.canonicalJSON)")
    }

    /// A view restored from its encoded collection and the source has the same content and version.
    private func checkRestore(_ view: LiveView, _ source: VersionedCollection?, _ context: String) throws {
        var writer = BinaryWriter()
        view.collection.encode(into: &writer)
        var reader = BinaryReader(writer.bytes)
        let collection = try VersionedCollection(decoding: &reader, limits: .init())
        let restored = LiveView(restoring: collection, definition: view.definition, source: source)
        #expect(restored.version == view.version && restored.snapshot() == view.snapshot(), "\(context)")
    }
}

/// Large source changes take the other path (the content rebuilt from the index and diffed in full): the same
/// properties hold there.
@Suite struct ViewMaintenanceBulkTests {
    @Test func largeReplacementsRebuildTheContent() throws {
        var checked = 0
        for seed in UInt64(1)...20 {
            var random = RandomViews(seed: seed)
            let items = random.items(400)
            var source = try VersionedCollection(
                epoch: "s",
                sections: stride(from: 0, to: 400, by: 100).map {
                    Section(id: "s\($0)", items: Array(items[$0..<($0 + 100)]))
                })
            for _ in 0..<3 {
                var view = LiveView(epoch: "v", definition: random.definition(source: "s"), source: source)
                let before = (source.version, view.snapshot())
                let replacement =
                    random.replacement(of: source.snapshot()) + [Section(id: "extra", items: random.items(100))]
                _ = try source.replace(with: replacement)
                let delta = try #require(SourceDelta(source: source, since: before.0))
                #expect(delta.items.count > 64, "seed \(seed)")
                let changeset = view.apply(delta)
                let expected = NaiveView.content(view.definition, source: source.snapshot())
                #expect(view.snapshot() == expected, "seed \(seed)")
                if let changeset {
                    verify(changeset, from: before.1, to: view.snapshot(), "seed \(seed)")
                } else {
                    #expect(before.1 == expected, "seed \(seed)")
                }
                checked += 1
            }
        }
        #expect(checked == 60)
    }
}
