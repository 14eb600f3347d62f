/// What takes a client from version `from` to version `to`: deleted, inserted and moved form one batch that
/// UIKit's `performBatchUpdates` accepts as it stands; `updated` applies after it, at after-batch coordinates.
/// Every array is sorted by its first index. The rules it obeys: `docs/changesets.md#the-rules`.
public struct Changeset: Hashable, Sendable {
    /// The version the changeset applies to.
    public var from: Version
    /// The version it leads to.
    public var to: Version
    /// What happens to sections.
    public var sections: SectionChanges
    /// What happens to items.
    public var items: ItemChanges

    /// A changeset from `from` to `to`; nothing changes unless given.
    public init(from: Version, to: Version, sections: SectionChanges = .init(), items: ItemChanges = .init()) {
        self.from = from
        self.to = to
        self.sections = sections
        self.items = items
    }

    /// True when the changeset changes nothing.
    public var isEmpty: Bool { sections.isEmpty && items.isEmpty }
}

/// The four arrays of section changes.
public struct SectionChanges: Hashable, Sendable {
    /// Before-batch indices.
    public var deleted: [SectionDeletion]
    /// After-batch indices, each with the section's data and all its items.
    public var inserted: [SectionInsertion]
    /// Before-batch index to after-batch index.
    public var moved: [SectionMove]
    /// After-batch indices, applied after the batch.
    public var updated: [SectionUpdate]

    /// Section changes; every array defaults to empty.
    public init(
        deleted: [SectionDeletion] = [], inserted: [SectionInsertion] = [], moved: [SectionMove] = [],
        updated: [SectionUpdate] = []
    ) {
        self.deleted = deleted
        self.inserted = inserted
        self.moved = moved
        self.updated = updated
    }

    /// True when all four arrays are empty.
    public var isEmpty: Bool { deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty }
}

/// The four arrays of item changes.
public struct ItemChanges: Hashable, Sendable {
    /// Before-batch index paths.
    public var deleted: [ItemDeletion]
    /// After-batch index paths.
    public var inserted: [ItemInsertion]
    /// Before-batch index path to after-batch index path.
    public var moved: [ItemMove]
    /// After-batch index paths, applied after the batch.
    public var updated: [ItemUpdate]

    /// Item changes; every array defaults to empty.
    public init(
        deleted: [ItemDeletion] = [], inserted: [ItemInsertion] = [], moved: [ItemMove] = [],
        updated: [ItemUpdate] = []
    ) {
        self.deleted = deleted
        self.inserted = inserted
        self.moved = moved
        self.updated = updated
    }

    /// True when all four arrays are empty.
    public var isEmpty: Bool { deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty }
}

extension SectionChanges {
    /// Sorts every array by its first index, as a changeset lists them.
    mutating func sortByFirstIndex() {
        deleted.sort { $0.index < $1.index }
        inserted.sort { $0.index < $1.index }
        moved.sort { $0.from < $1.from }
        updated.sort { $0.index < $1.index }
    }
}

extension ItemChanges {
    /// Sorts every array by its first index, as a changeset lists them.
    mutating func sortByFirstIndex() {
        deleted.sort { $0.at < $1.at }
        inserted.sort { $0.at < $1.at }
        moved.sort { $0.from < $1.from }
        updated.sort { $0.at < $1.at }
    }
}

/// A section deleted, at its index before the batch.
public struct SectionDeletion: Hashable, Sendable {
    /// The index before the batch.
    public var index: Int
    /// The section's id.
    public var id: String
    /// The entry with these fields.
    public init(index: Int, id: String) {
        self.index = index
        self.id = id
    }
}

/// A section inserted whole (with its items), at its index after the batch.
public struct SectionInsertion: Hashable, Sendable {
    /// The index after the batch.
    public var index: Int
    /// The section, with its data and all its items.
    public var section: Section
    /// The entry with these fields.
    public init(index: Int, section: Section) {
        self.index = index
        self.section = section
    }
}

/// A section moved, from its index before the batch to its index after it.
public struct SectionMove: Hashable, Sendable {
    /// The index before the batch.
    public var from: Int
    /// The index after the batch.
    public var to: Int
    /// The section's id.
    public var id: String
    /// The entry with these fields.
    public init(from: Int, to: Int, id: String) {
        self.from = from
        self.to = to
        self.id = id
    }
}

/// A section's new data, at its index after the batch (applied after it).
public struct SectionUpdate: Hashable, Sendable {
    /// The index after the batch.
    public var index: Int
    /// The section's id.
    public var id: String
    /// The new data.
    public var data: JSONData
    /// The entry with these fields.
    public init(index: Int, id: String, data: JSONData) {
        self.index = index
        self.id = id
        self.data = data
    }
}

/// An item deleted, at its path before the batch.
public struct ItemDeletion: Hashable, Sendable {
    /// The path before the batch.
    public var at: ItemPath
    /// The item's id.
    public var id: String
    /// The entry with these fields.
    public init(at: ItemPath, id: String) {
        self.at = at
        self.id = id
    }
}

/// An item inserted, at its path after the batch.
public struct ItemInsertion: Hashable, Sendable {
    /// The path after the batch.
    public var at: ItemPath
    /// The item, with its data.
    public var item: Item
    /// The entry with these fields.
    public init(at: ItemPath, item: Item) {
        self.at = at
        self.item = item
    }
}

/// An item moved, from its path before the batch to its path after it.
public struct ItemMove: Hashable, Sendable {
    /// The path before the batch.
    public var from: ItemPath
    /// The path after the batch.
    public var to: ItemPath
    /// The item's id.
    public var id: String
    /// The entry with these fields.
    public init(from: ItemPath, to: ItemPath, id: String) {
        self.from = from
        self.to = to
        self.id = id
    }
}

/// An item's new data, at its path after the batch (applied after it).
public struct ItemUpdate: Hashable, Sendable {
    /// The path after the batch.
    public var at: ItemPath
    /// The item's id and its new data.
    public var item: Item
    /// The entry with these fields.
    public init(at: ItemPath, item: Item) {
        self.at = at
        self.item = item
    }
}
