import ChangeFeedClient
import ChangesetChecks
import Foundation
import Model
import ProcessSupport

/// A `FeedClient` driven by hand: pulls events into a `LiveCollection` and checks every step with the
/// independent oracles (the UIKit batch model, minimal moves).
struct Follower: Sendable {
    var events: FeedEvents.Iterator
    var live = LiveCollection()
    var resets = 0
    var changesets = 0
    var missing = 0

    init(_ client: FeedClient, resumingFrom cursor: Version? = nil, live: LiveCollection = LiveCollection()) {
        events = client.events(resumingFrom: cursor).makeAsyncIterator()
        self.live = live
    }

    /// Pulls and applies events until the mirror is at `version`.
    mutating func catchUp(to version: String) async throws {
        while live.version.map({ "\($0)" }) != version {
            guard let event = try await events.next() else { throw TestFailure("the feed ended") }
            try apply(event)
        }
    }

    /// Applies one event and checks it and its update value against the oracles.
    mutating func apply(_ event: FeedEvent) throws {
        let old = live.sections
        let update = try live.apply(event)
        let new = live.sections
        switch event {
        case .reset(let snapshot):
            resets += 1
            guard update.kind == .reload, new == snapshot.sections else { throw TestFailure("reset not mirrored") }
        case .changes(let changeset):
            changesets += 1
            let expected = try UIKitBatch.apply(changeset, to: old)
            guard expected == new else { throw TestFailure("mirror \(new) differs from the oracle's \(expected)") }
            if let mismatch = MinimalMoves.mismatch(changeset, old: old, new: new) { throw TestFailure(mismatch) }
            let rebuilt = Self.changeset(of: update, old: old, new: new, from: changeset.from)
            let replayed = try UIKitBatch.apply(rebuilt, to: old)
            guard replayed == new else { throw TestFailure("the update value does not reproduce the mirror") }
            let reconfigured = update.reconfiguredItems.map { new[$0[0]].items[$0[1]].id }
            guard reconfigured == update.reconfiguredItemIDs else { throw TestFailure("reconfigured ids differ") }
        case .missing:
            missing += 1
            guard update.kind == .reload, update.version == nil, live.version == nil, new.isEmpty else {
                throw TestFailure("a missing collection not mirrored as empty")
            }
        }
        guard update.identifiers.sectionIDs == new.map(\.id),
            new.indices.allSatisfy({ update.identifiers.itemIDs(inSection: $0) == new[$0].items.map(\.id) })
        else { throw TestFailure("identifiers differ from the mirror") }
    }

    /// The changeset a UIKit app performs from an update value: the coordinates are the update's, the ids and
    /// contents come from the mirror before (deleted, moved) and after (inserted, reconfigured) the batch.
    static func changeset(of update: CollectionUpdate, old: [Section], new: [Section], from: Version) -> Changeset {
        func path(_ indexPath: Foundation.IndexPath) -> ItemPath {
            ItemPath(section: indexPath[0], item: indexPath[1])
        }
        return Changeset(
            from: from, to: update.version ?? from,
            sections: SectionChanges(
                deleted: update.deletedSections.map { SectionDeletion(index: $0, id: old[$0].id) },
                inserted: update.insertedSections.map { SectionInsertion(index: $0, section: new[$0]) },
                moved: update.movedSections.map { SectionMove(from: $0.from, to: $0.to, id: old[$0.from].id) },
                updated: update.reloadedSections.map { SectionUpdate(index: $0, id: new[$0].id, data: new[$0].data) }),
            items: ItemChanges(
                deleted: update.deletedItems.map { ItemDeletion(at: path($0), id: old[$0[0]].items[$0[1]].id) },
                inserted: update.insertedItems.map { ItemInsertion(at: path($0), item: new[$0[0]].items[$0[1]]) },
                moved: update.movedItems.map {
                    ItemMove(from: path($0.from), to: path($0.to), id: old[$0.from[0]].items[$0.from[1]].id)
                },
                updated: update.reconfiguredItems.map { ItemUpdate(at: path($0), item: new[$0[0]].items[$0[1]]) }))
    }
}
