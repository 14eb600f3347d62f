import Testing

@testable import Model

@Suite struct HistoryTests {
    func mutated(_ count: Int, limits: HistoryLimits = .init()) throws -> VersionedCollection {
        var collection = try VersionedCollection(epoch: "e", sections: sections("s:"), limits: limits)
        for i in 0..<count {
            _ = try collection.apply([
                .insertItems(at: ItemPosition(section: .index(0), index: 0), items: [Item(id: "i\(i)")])
            ])
        }
        return collection
    }

    @Test func versionsBeyondTheLimitExpire() throws {
        let collection = try mutated(10, limits: HistoryLimits(versions: 4))
        #expect(collection.version == Version(epoch: "e", seq: 11))
        for seq in UInt64(0)...11 {
            #expect((collection.changes(since: Version(epoch: "e", seq: seq)) != nil) == (seq >= 7), "seq \(seq)")
        }
    }

    @Test func theByteBudgetDropsOldestVersions() throws {
        let collection = try mutated(50, limits: HistoryLimits(versions: 1000, bytes: 2000))
        #expect(collection.changes(since: Version(epoch: "e", seq: 1)) == nil)
        #expect(collection.changes(since: Version(epoch: "e", seq: 50)) != nil)
        var lowered = collection
        lowered.limits.versions = 0
        #expect(lowered.changes(since: Version(epoch: "e", seq: 50)) == nil)
        #expect(lowered.changes(since: lowered.version)?.isEmpty == true)
    }

    @Test func otherEpochsAndFutureVersionsAreUnknown() throws {
        let collection = try mutated(2)
        #expect(collection.changes(since: Version(epoch: "f", seq: 1)) == nil)
        #expect(collection.changes(since: Version(epoch: "e", seq: 4)) == nil)
        #expect(collection.changes(since: Version(epoch: "e", seq: .max)) == nil)
        let current = try #require(collection.changes(since: collection.version))
        #expect(current.isEmpty && current.from == collection.version && current.to == collection.version)
    }

    @Test func coalescedChangesetSpansManyVersions() throws {
        let collection = try mutated(20)
        let changeset = try #require(collection.changes(since: Version(epoch: "e", seq: 1)))
        #expect(changeset.from.seq == 1 && changeset.to.seq == 21)
        #expect(changeset.items.inserted.map(\.item.id) == (0..<20).reversed().map { "i\($0)" })
    }

    @Test func mutationsThatChangeNothingCommitNothing() throws {
        var collection = try VersionedCollection(epoch: "e", sections: sections("s: a b"))
        let version = collection.version
        let noOps: [[Op]] = [
            [],
            [.updateItems([Item(id: "a")])],
            [.moveItem(.id("a"), to: ItemPosition(section: .index(0), index: 0))],
            [
                .insertItems(at: ItemPosition(section: .index(0), index: 2), items: [Item(id: "c")]),
                .deleteItems([.id("c")]),
            ],
            [.moveSection(.index(0), to: 0), .updateSection(.index(0), data: .null)],
        ]
        for ops in noOps {
            let changeset = try collection.apply(ops)
            #expect(changeset == Changeset(from: version, to: version), "\(ops)")
        }
        #expect(try collection.replace(with: sections("s: a b")) == Changeset(from: version, to: version))
        #expect(collection.version == version)
        #expect(try collection.apply([.updateItems([Item(id: "a", data: json("1"))])]).to == version.next)
        #expect(collection.version == version.next)
    }
}
