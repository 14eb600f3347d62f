import Model
import Synchronization

/// Which lanes a record runs on. A collection's records run on the lane of its name. A view's records run on the
/// lanes of its old and new source collections together (and a lane of the view's own), so that a view is
/// attached to or detached from a source at the same point of that source's record order as in the journal:
/// applying records on lanes then gives exactly what replaying the journal in order gives.
///
/// It follows each view's source as records are handed over in journal order (by the journal's callbacks), which
/// is before they are applied: so it must never guess wrong, and view records are never refused once journaled
/// (routes check them first; they carry no conditions).
final class LaneRouter: Sendable {
    private let viewSources: Mutex<[String: String]>

    /// `views`: the views recovered at start, whose sources are known.
    init(views: ViewRegistry) {
        viewSources = Mutex(
            Dictionary(uniqueKeysWithValues: views.all().map { ($0.name, $0.live.withLock { $0.definition.source }) }))
    }

    /// The lanes of `record`; call it once per record, in journal order.
    func lanes(for record: JournalRecord) -> Set<String> {
        switch record {
        case .put, .ops, .upsert, .delete:
            return [record.name]
        case .defineView(let view, _, let definition, _):
            let source = (try? ViewDefinition(json: definition.bytes))?.source
            let old = viewSources.withLock { sources in
                defer { if let source { sources[view] = source } }
                return sources[view]
            }
            return Set([Self.lane(ofView: view)] + [old, source].compactMap { $0 })
        case .deleteView(let view, _):
            let old = viewSources.withLock { $0.removeValue(forKey: view) }
            return Set([Self.lane(ofView: view)] + [old].compactMap { $0 })
        }
    }

    /// A view's own lane: a name no collection can have (collection names have no `:`).
    static func lane(ofView name: String) -> String { "view:" + name }
}
