/// One primitive edit of a `Store`, carrying what it takes to undo it. The op interpreter turns each op into
/// these; a failed batch undoes them, and the history keeps them to walk back to older versions.
/// Item positions name their section by id so that they stay meaningful whatever happens to section indices.
enum Change: Sendable {
    /// An empty section was inserted (its items follow as `itemInserted`).
    case sectionInserted(id: String, at: Int)
    /// An empty section was removed (its items were removed before, as `itemRemoved`).
    case sectionRemoved(id: String, data: JSONData, at: Int)
    case sectionMoved(id: String, from: Int, to: Int)
    case sectionDataSet(id: String, old: JSONData)
    case itemInserted(id: String, section: String, at: Int)
    case itemRemoved(Item, section: String, at: Int)
    /// Removed at `from`/`fromIndex`, then inserted at `to`/`toIndex` in the state after the removal.
    case itemMoved(id: String, from: String, fromIndex: Int, to: String, toIndex: Int)
    case itemDataSet(id: String, old: JSONData)
    /// The whole content was replaced; `old` is what it was.
    case replaced(old: [Section])

    /// An approximate number of bytes the change keeps alive, for the history's byte budget.
    var byteCount: Int {
        switch self {
        case .sectionInserted(let id, _): 32 + id.utf8.count
        case .sectionRemoved(let id, let data, _): 48 + id.utf8.count + data.bytes.count
        case .sectionMoved(let id, _, _): 40 + id.utf8.count
        case .sectionDataSet(let id, let old): 40 + id.utf8.count + old.bytes.count
        case .itemInserted(let id, let section, _): 48 + id.utf8.count + section.utf8.count
        case .itemRemoved(let item, let section, _):
            64 + item.id.utf8.count + item.data.bytes.count + section.utf8.count
        case .itemMoved(let id, let from, _, let to, _): 64 + id.utf8.count + from.utf8.count + to.utf8.count
        case .itemDataSet(let id, let old): 40 + id.utf8.count + old.bytes.count
        case .replaced(let old): 32 + old.reduce(0) { $0 + Change.byteCount(of: $1) }
        }
    }

    private static func byteCount(of section: Section) -> Int {
        section.items.reduce(48 + section.id.utf8.count + section.data.bytes.count) {
            $0 + 48 + $1.id.utf8.count + $1.data.bytes.count
        }
    }
}
