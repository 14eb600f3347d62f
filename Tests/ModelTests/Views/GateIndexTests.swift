import Testing

@testable import Model

/// A view restored with an index of its source by the fields gates test (`GateIndex`) evaluates only the items
/// its gate lets through, and is the view restored from the whole source: the same members, index, content and
/// version, and the same changesets for what comes after.
@Suite struct GateIndexTests {
    @Test func aViewRestoredThroughItsGateIsTheViewRestoredFromTheWholeSource() throws {
        var restored = 0
        var pruned = 0
        for seed in UInt64(1)...300 {
            var random = RandomViews(seed: seed)
            var source = try VersionedCollection(
                epoch: "s",
                sections: (0..<random.int(1...3)).map { _ in
                    Section(id: random.freshID("s"), items: random.items(random.int(0...20)))
                })
            let definition = try gatedDefinition(&random)
            let gate = try #require(definition.gate, "seed \(seed): the definition has no gate")
            let view = LiveView(epoch: "v", definition: definition, source: source)
            let collection = try roundTrip(view.collection)
            // Another view's gate beside this one's, as the views of one source share an index.
            let other = try #require(try gatedDefinition(&random).gate)
            let index = GateIndex(source, gates: [gate, other])
            var whole = LiveView(restoring: collection, definition: definition, source: source)
            var gated = LiveView(restoring: collection, definition: definition, source: source, gates: index)
            let context = "seed \(seed): \(definition.canonicalJSON)"
            expectSame(gated, whole, context)
            let candidates = try #require(index.slots(passing: gate))
            #expect(candidates == candidates.sorted() && Set(candidates).count == candidates.count, "\(context)")
            if candidates.count < source.itemCount { pruned += 1 }
            // What comes after finds the same members: the same changesets.
            let since = source.version
            _ = try source.apply(random.ops(on: source.snapshot()))
            let delta = try #require(SourceDelta(source: source, since: since))
            #expect(gated.apply(delta) == whole.apply(delta), "\(context): after \(delta)")
            expectSame(gated, whole, "\(context) after a change")
            restored += 1
        }
        #expect(restored == 300 && pruned >= 150, "\(restored) restored, \(pruned) through fewer items than the source")
    }

    /// Several views of one source, gated on different fields or not at all, share one index (as at a start), and
    /// are restored after their source changed further (deletions leave free slots, and restored views whose
    /// saved content no longer fits commit the difference): each is the view restored from the whole source.
    @Test func viewsSharingAnIndexAreRestoredAsFromTheWholeSource() throws {
        var restored = 0
        var pruned = 0
        var committed = 0
        for seed in UInt64(1)...300 {
            var random = RandomViews(seed: seed &* 7919)
            var source = try VersionedCollection(
                epoch: "s",
                sections: (0..<random.int(1...3)).map { _ in
                    Section(id: random.freshID("s"), items: random.items(random.int(0...25)))
                })
            let definitions = try (0..<random.int(2...5)).map { _ in
                try random.chance(75)
                    ? gatedDefinition(&random)
                    : ViewDefinition(source: "s", filter: random.filter(), sectionBy: nil, sortBy: [], limit: nil)
            }
            var views = definitions.map { LiveView(epoch: "v", definition: $0, source: source) }
            for _ in 0..<random.int(0...2) {
                let since = source.version
                _ = try source.apply(random.ops(on: source.snapshot()))
                let delta = try #require(SourceDelta(source: source, since: since))
                for view in views.indices { _ = views[view].apply(delta) }
            }
            let saved = try views.map { try roundTrip($0.collection) }
            for _ in 0..<random.int(1...4) { _ = try source.apply(random.ops(on: source.snapshot())) }
            let index = GateIndex(source, gates: definitions.compactMap(\.gate))
            for (definition, collection) in zip(definitions, saved) {
                let whole = LiveView(restoring: collection, definition: definition, source: source)
                let gated = LiveView(restoring: collection, definition: definition, source: source, gates: index)
                expectSame(gated, whole, "seed \(seed): \(definition.canonicalJSON)")
                if gated.version != collection.version { committed += 1 }
                if let gate = definition.gate, let slots = index.slots(passing: gate), slots.count < source.itemCount {
                    pruned += 1
                }
                restored += 1
            }
        }
        #expect(restored >= 900 && pruned >= 300 && committed >= 100, "\(restored), \(pruned), \(committed)")
    }

    /// An index built for another field, or for other values of the field, gives no candidates: the whole source
    /// is read.
    @Test func anIndexWithoutTheGatesFieldOrValuesReadsTheWholeSource() throws {
        let owner = try #require(JSONPointer("/owner"))
        let source = try VersionedCollection(
            epoch: "s",
            sections: [
                Section(
                    id: "all",
                    items: [
                        Item(id: "a", data: JSON.object(["owner": .string("u1")]).data),
                        Item(id: "b", data: JSON.object(["owner": .string("u2")]).data),
                        Item(id: "c", data: JSON.object([:]).data),
                    ])
            ])
        let gate = try #require(ViewGate(.leaf(field: owner, .in([.string("u1"), .null]))))
        let u2 = try #require(ViewGate(.leaf(field: owner, .eq(.string("u2")))))
        let index = GateIndex(source, gates: [gate, u2])
        #expect(index.slots(passing: gate)?.count == 2, "u1 and the missing owner")
        #expect(index.slots(passing: u2)?.count == 1)
        let otherField = try #require(JSONPointer("/other"))
        let other = try #require(ViewGate(.leaf(field: otherField, .eq(.string("u1")))))
        #expect(GateIndex(source, gates: [other]).slots(passing: gate) == nil)
        // u3 was asked for by no gate the index was built from: its items were not kept.
        let u3 = try #require(ViewGate(.leaf(field: owner, .in([.string("u2"), .string("u3")]))))
        #expect(index.slots(passing: u3) == nil)
    }

    /// A definition whose filter implies a gate: an `eq` or an `in` on a field, alone or in an `all` with a random
    /// filter.
    private func gatedDefinition(_ random: inout RandomViews) throws -> ViewDefinition {
        let field = random.field()
        let gate: ViewFilter =
            random.chance(50)
            ? .leaf(field: field, .eq(random.value()))
            : .leaf(field: field, .in((0..<random.int(1...3)).map { _ in random.value() }))
        return try ViewDefinition(
            source: "s", filter: random.chance(50) ? gate : .all([gate, random.filter()]),
            sectionBy: random.chance(50) ? ViewKey(field: random.field(), descending: random.chance(50)) : nil,
            sortBy: (0..<random.int(0...2)).map { _ in ViewKey(field: random.field(), descending: random.chance(50)) },
            limit: random.chance(40) ? random.int(1...5) : nil)
    }

    private func roundTrip(_ collection: VersionedCollection) throws -> VersionedCollection {
        var writer = BinaryWriter()
        collection.encode(into: &writer)
        var reader = BinaryReader(writer.bytes)
        return try VersionedCollection(decoding: &reader, limits: .init())
    }

    private func expectSame(_ gated: LiveView, _ whole: LiveView, _ context: String) {
        #expect(gated.version == whole.version && gated.snapshot() == whole.snapshot(), "\(context)")
        #expect(gated.index.count == whole.index.count, "\(context)")
        #expect(gated.members.count == whole.members.count, "\(context)")
        for (id, member) in whole.members {
            let other = gated.members[id]
            #expect(
                other?.placement == member.placement && other?.data.bytes == member.data.bytes, "\(context): \(id)")
        }
    }
}
