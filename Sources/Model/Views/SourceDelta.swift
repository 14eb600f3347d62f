/// What changed in a view's source, as a view needs it: for each touched item, its data now, or nil when it is
/// gone. Where items sit in the source does not matter to a view (it orders them itself), so moves are not listed.
///
/// Build it from the source's own history (`init(source:since:)`, which walks the change logs of the mutations
/// since a version, so a one-item mutation gives a one-item delta whatever happened to sections), or with
/// `created(_:)` and `deleted` when the source appears or goes away.
public struct SourceDelta: Sendable {
    /// The touched items, each once: the current data, or nil for an item that is no longer in the source.
    public private(set) var items: [(id: String, data: JSONData?)]
    /// Whether every item leaves the view before `items` apply: the source was deleted, or created again.
    public private(set) var removesEverything: Bool
    /// For each of `items`, its data before the change, nil for an item that was not in the source then; nil
    /// when that is not known (a source created, deleted or replaced). What tells which views the change can
    /// touch (`ViewDispatch`).
    public private(set) var previous: [JSONData?]?

    private init(items: [(id: String, data: JSONData?)], removesEverything: Bool, previous: [JSONData?]? = nil) {
        self.items = items
        self.removesEverything = removesEverything
        self.previous = previous
    }

    /// The source was deleted.
    public static let deleted = SourceDelta(items: [], removesEverything: true)

    /// The source was created (or created again) with this content.
    /// - Complexity: O(n).
    public static func created(_ source: VersionedCollection) -> SourceDelta {
        created(sections: source.snapshot())
    }

    /// The source was created (or created again) holding these sections.
    /// - Complexity: O(n).
    public static func created(sections: [Section]) -> SourceDelta {
        SourceDelta(items: sections.flatMap { $0.items.map { ($0.id, $0.data) } }, removesEverything: true)
    }

    /// The items that the mutations of `source` after version `since` touched, with their current data.
    /// A replaced content (a `PUT`) lists every old and every current item.
    /// - Returns: nil when `since` is not a version whose changes `source` keeps (another epoch, ahead, or
    ///   older than its kept history): the view must then be rebuilt (`LiveView.redefine`).
    /// - Complexity: O(k log n) for k touched items, O(n) after a replaced content.
    public init?(source: VersionedCollection, since: Version) {
        let current = source.version
        guard since.epoch == current.epoch, since.seq <= current.seq else { return nil }
        guard since != current else {
            self.init(items: [], removesEverything: false, previous: [])
            return
        }
        guard let entries = source.history.entries(after: since, current: current) else { return nil }
        if entries.count == 1, entries[entries.startIndex].changes.count == 1 {
            // One change (an item upserted, updated or deleted): nothing to deduplicate.
            let touched: (id: String, before: JSONData?)? =
                switch entries[entries.startIndex].changes[0] {
                case .itemInserted(let id, _, _): (id, nil)
                case .itemDataSet(let id, let old): (id, old)
                case .itemRemoved(let item, _, _): (item.id, item.data)
                default: nil
                }
            if let touched {
                self.init(
                    items: [(touched.id, source.data(ofItem: touched.id))], removesEverything: false,
                    previous: [touched.before])
                return
            }
        }
        // Each item's first change tells what it held at `since`: the changes are listed in the order they were made.
        var touched: [String] = []
        var previous: [JSONData?] = []
        var seen = Set<ExactString>()
        var replaced = false
        func touch(_ id: String, before: JSONData?) {
            guard seen.insert(ExactString(id)).inserted else { return }
            touched.append(id)
            previous.append(before)
        }
        for entry in entries {
            for change in entry.changes {
                switch change {
                case .itemInserted(let id, _, _): touch(id, before: nil)
                case .itemDataSet(let id, let old): touch(id, before: old)
                case .itemRemoved(let item, _, _): touch(item.id, before: item.data)
                case .replaced(let old):
                    replaced = true
                    for section in old {
                        for item in section.items { touch(item.id, before: item.data) }
                    }
                case .sectionInserted, .sectionRemoved, .sectionMoved, .sectionDataSet, .itemMoved:
                    continue
                }
            }
        }
        guard replaced else {
            self.init(
                items: touched.map { ($0, source.data(ofItem: $0)) }, removesEverything: false, previous: previous)
            return
        }
        // After a replacement every current item may be new: list them all, and the touched ones now gone.
        var items: [(id: String, data: JSONData?)] = []
        var present = Set<ExactString>()
        for section in source.snapshot() {
            for item in section.items {
                items.append((item.id, item.data))
                present.insert(ExactString(item.id))
            }
        }
        for id in touched where !present.contains(ExactString(id)) { items.append((id, nil)) }
        self.init(items: items, removesEverything: false)
    }
}
