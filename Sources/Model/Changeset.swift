/// What takes a client from version `from` to version `to`: deleted, inserted and moved form one batch that
/// UIKit's `performBatchUpdates` accepts as it stands; `updated` applies after it, at after-batch coordinates.
/// Every array is sorted by its first index. The rules it obeys: `docs/changesets.md#the-rules`.
public struct Changeset: Hashable, Sendable {
    public var from: Version
    public var to: Version
    public var sections: SectionChanges
    public var items: ItemChanges

    public init(from: Version, to: Version, sections: SectionChanges = .init(), items: ItemChanges = .init()) {
        self.from = from
        self.to = to
        self.sections = sections
        self.items = items
    }

    /// True when the changeset changes nothing.
    public var isEmpty: Bool { sections.isEmpty && items.isEmpty }
}

public struct SectionChanges: Hashable, Sendable {
    /// Before-batch indices.
    public var deleted: [SectionDeletion]
    /// After-batch indices, each with the section's data and all its items.
    public var inserted: [SectionInsertion]
    /// Before-batch index to after-batch index.
    public var moved: [SectionMove]
    /// After-batch indices, applied after the batch.
    public var updated: [SectionUpdate]

    public init(
        deleted: [SectionDeletion] = [], inserted: [SectionInsertion] = [], moved: [SectionMove] = [],
        updated: [SectionUpdate] = []
    ) {
        self.deleted = deleted
        self.inserted = inserted
        self.moved = moved
        self.updated = updated
    }

    public var isEmpty: Bool { deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty }
}

public struct ItemChanges: Hashable, Sendable {
    /// Before-batch index paths.
    public var deleted: [ItemDeletion]
    /// After-batch index paths.
    public var inserted: [ItemInsertion]
    /// Before-batch index path to after-batch index path.
    public var moved: [ItemMove]
    /// After-batch index paths, applied after the batch.
    public var updated: [ItemUpdate]

    public init(
        deleted: [ItemDeletion] = [], inserted: [ItemInsertion] = [], moved: [ItemMove] = [],
        updated: [ItemUpdate] = []
    ) {
        self.deleted = deleted
        self.inserted = inserted
        self.moved = moved
        self.updated = updated
    }

    public var isEmpty: Bool { deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty }
}

public struct SectionDeletion: Hashable, Sendable {
    public var index: Int
    public var id: String
    public init(index: Int, id: String) {
        self.index = index
        self.id = id
    }
}

public struct SectionInsertion: Hashable, Sendable {
    public var index: Int
    public var section: Section
    public init(index: Int, section: Section) {
        self.index = index
        self.section = section
    }
}

public struct SectionMove: Hashable, Sendable {
    public var from: Int
    public var to: Int
    public var id: String
    public init(from: Int, to: Int, id: String) {
        self.from = from
        self.to = to
        self.id = id
    }
}

public struct SectionUpdate: Hashable, Sendable {
    public var index: Int
    public var id: String
    public var data: JSONData
    public init(index: Int, id: String, data: JSONData) {
        self.index = index
        self.id = id
        self.data = data
    }
}

public struct ItemDeletion: Hashable, Sendable {
    public var at: IndexPath
    public var id: String
    public init(at: IndexPath, id: String) {
        self.at = at
        self.id = id
    }
}

public struct ItemInsertion: Hashable, Sendable {
    public var at: IndexPath
    public var item: Item
    public init(at: IndexPath, item: Item) {
        self.at = at
        self.item = item
    }
}

public struct ItemMove: Hashable, Sendable {
    public var from: IndexPath
    public var to: IndexPath
    public var id: String
    public init(from: IndexPath, to: IndexPath, id: String) {
        self.from = from
        self.to = to
        self.id = id
    }
}

public struct ItemUpdate: Hashable, Sendable {
    public var at: IndexPath
    public var item: Item
    public init(at: IndexPath, item: Item) {
        self.at = at
        self.item = item
    }
}
