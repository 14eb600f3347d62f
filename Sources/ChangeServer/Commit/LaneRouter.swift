import Model
import Synchronization

/// Which lanes a record runs on. A collection's records run on the lane of its name. A view's records run on the
/// lanes of its old and new source collections together (and a lane of the view's own), so that a view is
/// attached to or detached from a source at the same point of that source's record order as in the journal:
/// applying records on lanes then gives exactly what replaying the journal in order gives.
///
/// It follows each view's sources as records are handed over in journal order (by the journal's callbacks), which
/// is before they are applied, and must never miss the source a view has when its next record is applied. A view
/// record may yet leave the source as it was: refused for its `If-Match` or `If-None-Match`, or not made durable.
/// So until it is applied, the view may have either source, and its next records run on the lanes of both. Once no
/// record of the view is pending, the source it has is all that is kept (`settle`).
final class LaneRouter: Sendable {
    /// What is known of a view's source between hand-over and application.
    private struct Tracked {
        /// Every source the view may have when its next record is applied.
        var sources: Set<String>
        /// Records of the view handed over and not yet applied.
        var pending = 0
    }

    private let views: Mutex<[String: Tracked]>
    /// The collections and views held: their sizes decide whether a record is light (`hand`).
    private let collections: Registry
    private let viewRegistry: ViewRegistry

    /// `views`: the views recovered at start, whose sources are known.
    init(collections: Registry, views: ViewRegistry) {
        self.collections = collections
        viewRegistry = views
        self.views = Mutex(
            Dictionary(
                uniqueKeysWithValues: views.all().map {
                    ($0.name, Tracked(sources: [$0.live.withLock { $0.definition.source }]))
                }))
    }

    /// The lanes of `record`; call it once per record, in journal order.
    func lanes(for record: JournalRecord) -> Set<String> {
        switch record {
        case .put, .ops, .upsert, .delete:
            return [record.name]
        case .defineView(let view, _, let definition, _, _):
            let source = (try? ViewDefinition(json: definition.bytes))?.source
            let sources = views.withLock { views in
                var tracked = views[view] ?? Tracked(sources: [])
                tracked.pending += 1
                if let source { tracked.sources.insert(source) }
                views[view] = tracked
                return tracked.sources
            }
            return sources.union([Self.lane(ofView: view)])
        case .deleteView(let view, _):
            let sources = views.withLock { views in
                var tracked = views[view] ?? Tracked(sources: [])
                tracked.pending += 1
                views[view] = tracked
                return tracked.sources
            }
            return sources.union([Self.lane(ofView: view)])
        }
    }

    /// Records that a record of `view` was applied (on its lanes, so no other record of the view runs meanwhile),
    /// the view then having `source` (nil: it does not exist). With none of its records pending, that is its source.
    func settle(view: String, source: String?) {
        views.withLock { views in
            guard var tracked = views[view] else { return }
            tracked.pending -= 1
            if tracked.pending > 0 {
                views[view] = tracked
            } else if let source {
                views[view] = Tracked(sources: [source])
            } else {
                views[view] = nil
            }
        }
    }

    /// Hands `record` (its journal bytes: `bytes`) to its lanes, in journal order like `lanes(for:)`: `work` runs
    /// there, as bulk work (`Lanes`) when the record is not small. With `inPlace` (the caller is a thread of the
    /// journal's own, `Journal.callsBackOnItsOwnThread`), a light record whose lane is idle is tried at once on the
    /// calling thread with `attempt`, which must not wait for anything and returns false when it would have had
    /// to; `work` then runs on the lane after all (`Lanes.runInPlaceIfIdle`). True when `attempt` did the work.
    @discardableResult
    func hand(
        _ record: JournalRecord, bytes: Int, to lanes: Lanes, inPlace: Bool, attempt: () -> Bool,
        otherwise work: @escaping @Sendable () -> Void
    ) -> Bool {
        let isSmall = Self.isSmall(record, bytes: bytes)
        guard inPlace, isSmall, isLight(record) else {
            lanes.run(self.lanes(for: record), bulk: !isSmall, work)
            return false
        }
        return lanes.runInPlaceIfIdle(record.name, attempt: attempt, otherwise: work)
    }

    /// Records up to this size (journal bytes) can be small, and light.
    static let lightBytes = 16 * 1024
    /// Ops records of more ops than this are neither small nor light (600 item moves fit in 16 KiB).
    static let lightOps = 16
    /// A collection of more items than this has no light records. A read of its snapshot holds its lock for a time
    /// in proportion to its size (about 5 ms for 100,000 items), and a record applied in place would wait for it on
    /// the syncer, holding up every collection's commits; at this size the wait is well under a millisecond.
    static let lightItems = 10_000

    /// Whether applying `record` takes time independent of its collection's size: an upsert, or ops on items (or
    /// inserting or updating sections), small. A replacement (a full diff), a deletion, and ops that delete or
    /// move whole sections take time in proportion to the collection, and a view's definition in proportion to its
    /// source; so does a large record in proportion to itself. Those are bulk work (`Lanes`).
    static func isSmall(_ record: JournalRecord, bytes: Int) -> Bool {
        guard bytes <= lightBytes else { return false }
        switch record {
        case .upsert, .deleteView:
            return true
        case .ops(_, let ops, _):
            guard ops.count <= lightOps else { return false }
            for op in ops {
                switch op {
                case .deleteSections, .moveSection: return false
                case .insertSections, .updateSection, .insertItems, .deleteItems, .moveItem, .updateItems: continue
                }
            }
            return true
        case .put, .delete, .defineView:
            return false
        }
    }

    /// Whether a small record (`isSmall`) takes about as long to apply as the hand-over to a lane would: it is
    /// not a view's (view records run on several lanes), and its collection has few items, feeds no view (whose
    /// locks an in-place attempt would have to wait for), and has its lock free now
    /// (`Executor.executeWithoutWaiting` tries it again).
    private func isLight(_ record: JournalRecord) -> Bool {
        switch record {
        case .upsert, .ops: break
        case .put, .delete, .defineView, .deleteView: return false
        }
        guard viewRegistry.count(of: record.name) == 0 else { return false }
        // A collection not there: the record is refused at once (upserts and ops never make one).
        guard let entry = collections.entry(record.name) else { return true }
        return entry.content.withLockIfAvailable { $0.itemCount <= Self.lightItems } ?? false
    }

    /// A view's own lane: a name no collection can have (collection names have no `:`).
    static func lane(ofView name: String) -> String { "view:" + name }
}
