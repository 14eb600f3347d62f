import Model
import Synchronization

/// One collection: its name and its versioned content behind a lock, so that mutations of one collection are
/// serialised and each commits atomically with its version, while different collections proceed in parallel.
final class CollectionEntry: Sendable {
    let name: String
    let content: Mutex<VersionedCollection>
    /// The snapshot's JSON at one version, encoded once for all the reads at that version (`FeedSubject`).
    let encodedSnapshot = SnapshotCache()
    /// The polls and streams that follow it (`FeedSubject`).
    let followers = Followers()

    init(name: String, content: consuming VersionedCollection) {
        self.name = name
        self.content = Mutex(content)
    }
}

/// The collections the server holds, by name.
final class Registry: Sendable {
    private let entries = Mutex<[String: CollectionEntry]>([:])

    func entry(_ name: String) -> CollectionEntry? {
        entries.withLock { $0[name] }
    }

    /// All entries, sorted by name.
    func all() -> [CollectionEntry] {
        entries.withLock { Array($0.values) }.sorted { $0.name < $1.name }
    }

    /// Up to `limit` entries whose names sort after `after`, sorted by name, and whether more follow: all as the
    /// registry was at one moment (a page whose entries were looked up after the names, one by one, could come out
    /// empty, and so without `next`, while later collections existed).
    /// - Complexity: O(n log n) for n collections.
    func page(after: String?, limit: Int) -> (entries: [CollectionEntry], hasMore: Bool) {
        let candidates = entries.withLock { entries in
            after.map { after in entries.values.filter { $0.name > after } } ?? Array(entries.values)
        }.sorted { $0.name < $1.name }
        return (Array(candidates.prefix(limit)), candidates.count > limit)
    }

    var count: Int { entries.withLock { $0.count } }

    /// Adds `entry` unless a collection of that name exists; returns the entry now under that name.
    func insert(_ entry: CollectionEntry) -> CollectionEntry {
        entries.withLock { entries in
            if let existing = entries[entry.name] { return existing }
            entries[entry.name] = entry
            return entry
        }
    }

    /// Removes the entry if it is still the one under its name.
    func remove(_ entry: CollectionEntry) -> Bool {
        entries.withLock { entries in
            guard entries[entry.name] === entry else { return false }
            entries[entry.name] = nil
            return true
        }
    }
}
