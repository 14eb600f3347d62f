import Foundation
import Model

/// One mirrored section: its id, its data and its items.
struct MirrorSection: Hashable, Sendable {
    var id: String
    var data: JSONData
    var items: ItemList
}

/// A mirror of a collection or view, kept up to date by the events of its feed, like a Realm `Results` or an
/// `NSFetchedResultsController`: apply each event, show the `CollectionUpdate` it returns.
///
/// ```swift
/// var live = LiveCollection()
/// for try await event in client.events(resumingFrom: live.version) {
///     let update = try live.apply(event)
///     collectionView.apply(update)
/// }
/// ```
///
/// Each changeset is checked against the mirror as it is applied: every id at the place the changeset says,
/// every index in range, no item placed in or taken from a section that is inserted, deleted or moved (rule 3),
/// no item id twice in the collection. A changeset that fails is refused with `FeedError.invalidChangeset`:
/// the mirror keeps its content as it was before that changeset and drops its version, so that following again
/// starts from a reset.
///
/// The mirror is `Codable`: save it with its version and, after a relaunch, resume the feed from `version`
/// (the server answers with the changes since, or a reset when it no longer keeps that version).
public struct LiveCollection: Sendable {
    /// The version of the content; nil before the first reset, after a refused changeset, and after
    /// `FeedEvent.missing` (which empties the mirror).
    public private(set) var version: Version?
    var mirror: [MirrorSection] = []
    /// Every item id of the mirror.
    var itemIDs: Set<ExactString> = []

    /// An empty mirror, at no version: its first event must be a reset.
    public init() {}

    /// A mirror of `snapshot`.
    /// - Throws: `FeedError.invalidChangeset` when a section id or an item id appears twice.
    public init(_ snapshot: Snapshot) throws(FeedError) {
        try reset(to: snapshot)
    }

    /// The number of sections.
    public var sectionCount: Int { mirror.count }

    /// The number of items in the section at `section`.
    public func itemCount(inSection section: Int) -> Int { mirror[section].items.count }

    /// The id and data of the section at `index`, without its items.
    public func section(at index: Int) -> (id: String, data: JSONData) { (mirror[index].id, mirror[index].data) }

    /// The item at `indexPath`.
    /// - Complexity: O(items of the section / 64).
    public func item(at indexPath: Foundation.IndexPath) -> Item {
        mirror[indexPath[0]].items[indexPath[1]]
    }

    /// Whether the mirror holds an item with this id (compared by its bytes, as the server compares ids).
    /// - Complexity: O(1).
    public func contains(itemID id: String) -> Bool { itemIDs.contains(ExactString(id)) }

    /// Where the item with this id is ("my rank" in a leaderboard, the row to scroll to), or nil when the mirror
    /// has no such item.
    /// - Complexity: O(n), a scan from the start (O(1) when the item is not there): for a lookup per row, keep an
    ///   index of your own, updated from each `CollectionUpdate`.
    public func indexPath(ofItem id: String) -> Foundation.IndexPath? {
        guard contains(itemID: id) else { return nil }
        let wanted = ExactString(id)
        for (section, mirrored) in mirror.enumerated() {
            var index = 0
            for chunk in mirrored.items.chunks {
                if let offset = chunk.firstIndex(where: { ExactString($0.id) == wanted }) {
                    return Foundation.IndexPath(indexes: [section, index + offset])
                }
                index += chunk.count
            }
        }
        return nil
    }

    /// The whole content as plain sections.
    /// - Complexity: O(n).
    public var sections: [Section] {
        mirror.map { Section(id: $0.id, data: $0.data, items: $0.items.items) }
    }

    /// The section and item ids in order, for a diffable data source.
    public var identifiers: CollectionUpdate.Identifiers { CollectionUpdate.Identifiers(sections: mirror) }

    /// Applies one event of the feed.
    /// - Returns: what changed, for the view.
    /// - Throws: `FeedError.invalidChangeset` when the changeset does not fit the mirror (see the type's
    ///   documentation); the mirror then has its content as before the changeset, and no version.
    /// - Complexity: a reset O(n); a changeset O(e log e + c) for e entries and c chunks of the sections it
    ///   touches (about one per 64 items), whatever the mirror's size.
    @discardableResult
    public mutating func apply(_ event: FeedEvent) throws(FeedError) -> CollectionUpdate {
        switch event {
        case .reset(let snapshot):
            try reset(to: snapshot)
            return CollectionUpdate(resetTo: snapshot.version, sections: mirror)
        case .changes(let changeset):
            guard let version, version == changeset.from else {
                let at = self.version.map { "\($0)" } ?? "no version"
                self.version = nil
                throw FeedError.invalidChangeset("a changeset from \(changeset.from) for a mirror at \(at)")
            }
            // Kept to put back if the changeset fails halfway: a view still showing the content before it must
            // find that content, not half of the changeset (a cell asked for by an index the mirror lost traps).
            // Holding it costs copies of the section list and of the chunks the changeset touches, not of items.
            let before = mirror
            do {
                // Decoded changesets were checked already; one built by other means is checked here, as
                // applying relies on it (sorted arrays, indices not negative).
                try ChangesetShape.check(changeset)
                try applyBatch(changeset)
            } catch {
                mirror = before
                itemIDs = Set(before.lazy.flatMap { $0.items.chunks.joined() }.map { ExactString($0.id) })
                self.version = nil
                throw error
            }
            self.version = changeset.to
            return CollectionUpdate(changeset: changeset, sections: mirror)
        case .missing:
            mirror = []
            itemIDs = []
            version = nil
            return CollectionUpdate(resetTo: nil, sections: mirror)
        }
    }

    private mutating func reset(to snapshot: Snapshot) throws(FeedError) {
        version = nil
        var ids = Set<ExactString>(minimumCapacity: snapshot.sections.reduce(0) { $0 + $1.items.count })
        var sectionIDs = Set<ExactString>(minimumCapacity: snapshot.sections.count)
        for section in snapshot.sections {
            guard sectionIDs.insert(ExactString(section.id)).inserted else {
                throw FeedError.invalidChangeset("section id \(section.id.debugDescription) appears twice")
            }
            for item in section.items where !ids.insert(ExactString(item.id)).inserted {
                throw FeedError.invalidChangeset("item id \(item.id.debugDescription) appears twice")
            }
        }
        mirror = snapshot.sections.map { MirrorSection(id: $0.id, data: $0.data, items: ItemList($0.items)) }
        itemIDs = ids
        version = snapshot.version
    }
}
