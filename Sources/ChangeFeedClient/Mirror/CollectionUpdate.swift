import Foundation
import Model

/// What one event did to a `LiveCollection`, in the terms UIKit and AppKit take.
///
/// For a `.batch`, give `deleted…`, `inserted…` and `moved…` to ONE `performBatchUpdates` (their coordinates
/// are UIKit's: deletions and move sources before the batch, insertions and move destinations after it), then
/// `reconfiguredItems` / `reloadedSections` after it. For a `.reload`, reload everything (or apply
/// `identifiers` to a diffable data source).
public struct CollectionUpdate: Sendable {
    /// How the update is to be shown.
    public enum Kind: Hashable, Sendable {
        /// A whole new content (the first snapshot, one after the cursor expired, or none for `.missing`):
        /// reload.
        case reload
        /// One batch of changes.
        case batch
    }

    /// A section's move, from its index before the batch to its index after it.
    public struct SectionMove: Hashable, Sendable {
        /// The index before the batch.
        public var from: Int
        /// The index after the batch.
        public var to: Int

        /// A move from `from` to `to` (what an app's own tests compare an update's `movedSections` with).
        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }
    }

    /// An item's move, from its index path before the batch to its index path after it.
    public struct ItemMove: Hashable, Sendable {
        /// The index path before the batch.
        public var from: Foundation.IndexPath
        /// The index path after the batch.
        public var to: Foundation.IndexPath

        /// A move from `from` to `to` (what an app's own tests compare an update's `movedItems` with).
        public init(from: Foundation.IndexPath, to: Foundation.IndexPath) {
            self.from = from
            self.to = to
        }
    }

    /// A reload or a batch.
    public var kind: Kind
    /// The version the mirror is at after this update; nil after `FeedEvent.missing`, which empties it.
    public var version: Version?
    /// Section indices before the batch.
    public var deletedSections = IndexSet()
    /// Section indices after the batch.
    public var insertedSections = IndexSet()
    /// Section moves, from before the batch to after it.
    public var movedSections: [SectionMove] = []
    /// Sections whose own data changed, by index after the batch: reload their headers and footers after it.
    public var reloadedSections = IndexSet()
    /// Index paths before the batch.
    public var deletedItems: [Foundation.IndexPath] = []
    /// Index paths after the batch.
    public var insertedItems: [Foundation.IndexPath] = []
    /// Item moves, from before the batch to after it.
    public var movedItems: [ItemMove] = []
    /// Items whose data changed, by index path after the batch: `reconfigureItems` after the batch.
    public var reconfiguredItems: [Foundation.IndexPath] = []
    /// The ids of `reconfiguredItems`, in the same order (for `NSDiffableDataSourceSnapshot.reconfigureItems`).
    public var reconfiguredItemIDs: [String] = []
    /// The ids of `reloadedSections`, in order.
    public var reloadedSectionIDs: [String] = []
    /// The mirror's section and item ids in order after the update, for a diffable data source.
    public var identifiers: Identifiers

    /// True when the update changes nothing that is shown.
    public var isEmpty: Bool {
        kind == .batch && deletedSections.isEmpty && insertedSections.isEmpty && movedSections.isEmpty
            && reloadedSections.isEmpty && deletedItems.isEmpty && insertedItems.isEmpty && movedItems.isEmpty
            && reconfiguredItems.isEmpty
    }

    /// The section and item ids of the mirror at one version, in order. It shares the mirror's storage (no copy
    /// is made until the mirror changes while this value is still held).
    public struct Identifiers: Sendable {
        let sections: [MirrorSection]

        /// The section ids in order.
        /// - Complexity: O(sections).
        public var sectionIDs: [String] { sections.map(\.id) }

        /// The item ids of the section at `index`, in order.
        /// - Complexity: O(items of that section).
        public func itemIDs(inSection index: Int) -> [String] {
            sections[index].items.chunks.flatMap { $0.map(\.id) }
        }
    }
}

extension CollectionUpdate {
    /// The Foundation index path of a Model one.
    /// (Built from one index then appended, which stores the pair inline: an array literal would allocate.)
    static func indexPath(_ path: ItemPath) -> Foundation.IndexPath {
        Foundation.IndexPath(index: path.section).appending(path.item)
    }

    /// The update for `changeset`, whose batch the mirror now holds as `sections`.
    /// - Complexity: O(n) for n entries.
    init(changeset: Changeset, sections: [MirrorSection]) {
        kind = .batch
        version = changeset.to
        identifiers = Identifiers(sections: sections)
        let sectionChanges = changeset.sections
        let itemChanges = changeset.items
        deletedSections = IndexSet(sectionChanges.deleted.map(\.index))
        insertedSections = IndexSet(sectionChanges.inserted.map(\.index))
        movedSections = sectionChanges.moved.map { SectionMove(from: $0.from, to: $0.to) }
        reloadedSections = IndexSet(sectionChanges.updated.map(\.index))
        reloadedSectionIDs = sectionChanges.updated.map(\.id)
        deletedItems = itemChanges.deleted.map { Self.indexPath($0.at) }
        insertedItems = itemChanges.inserted.map { Self.indexPath($0.at) }
        movedItems = itemChanges.moved.map { ItemMove(from: Self.indexPath($0.from), to: Self.indexPath($0.to)) }
        reconfiguredItems = itemChanges.updated.map { Self.indexPath($0.at) }
        reconfiguredItemIDs = itemChanges.updated.map(\.item.id)
    }

    /// The update for a reset to `sections` at `version` (nil: the mirror was emptied for `.missing`).
    init(resetTo version: Version?, sections: [MirrorSection]) {
        kind = .reload
        self.version = version
        identifiers = Identifiers(sections: sections)
    }
}
