import Model

/// Ids that builds before 9028546 (2026-12-03 11:22) took for one id when they were spellings of the same Unicode
/// text ("é" as U+00E9 and as "e" with U+0301; "K" and the Kelvin sign): they keyed ids by Swift's `String`, which
/// compares by canonical equivalence, where every build since compares bytes. Their records, in journal segments of
/// format 1, are replayed by the bytes: one that names an id spelled otherwise in its collection or in itself may
/// come out otherwise than it was applied (a deletion by id took the other spelling's section; two spellings in one
/// insertion were refused as a duplicate), under the versions its clients hold. Recovery asks this of every record
/// of format 1, and renews every epoch when one may have, so that clients reload rather than keep what they were
/// told under the same versions.
struct LegacyIDSpellings {
    /// Per collection, the first spelling met of each id that may be spelled otherwise (`note`), keyed by `String`,
    /// under which all spellings of a text are one key: another spelling is found by its key, and its bytes differ.
    private var spellings: [ExactString: [String: [UInt8]]] = [:]
    /// The collections whose content before their first record here was read in.
    private var read: Set<ExactString> = []
    /// Set by recovery once a record may have replayed otherwise: the epochs are renewed, and no more is asked.
    var mayHaveDiverged = false

    /// Whether `record` names an id that its collection, or the record itself, also holds spelled otherwise; notes
    /// the ids it names.
    /// - Complexity: O(ids in the record); the first record of a collection reads its content, O(n).
    mutating func mayReplayDifferently(_ record: JournalRecord, in registry: Registry) -> Bool {
        let ids = record.ids
        guard !ids.isEmpty else { return false }
        let name = record.name
        if read.insert(ExactString(name)).inserted, let entry = registry.entry(name) {
            let content = entry.content.withLock { $0.snapshot() }
            for section in content {
                note(section.id, in: name)
                for item in section.items { note(item.id, in: name) }
            }
        }
        for id in ids { note(id, in: name) }
        guard let known = spellings[ExactString(name)] else { return false }
        return ids.contains { id in known[id].map { !$0.elementsEqual(id.utf8) } ?? false }
    }

    /// Notes the spelling of an id that may have another: one that is not ASCII, or an ASCII one holding a letter
    /// that a character past ASCII is a spelling of (K, the Kelvin sign; `;`, the Greek question mark; the backtick,
    /// the Greek varia: the only ones whose canonical decomposition is ASCII).
    private mutating func note(_ id: String, in collection: String) {
        let mayHaveTwin = id.utf8.contains {
            $0 >= 0x80 || $0 == UInt8(ascii: "K") || $0 == UInt8(ascii: ";") || $0 == UInt8(ascii: "`")
        }
        guard mayHaveTwin else { return }
        if spellings[ExactString(collection)]?[id] == nil {
            spellings[ExactString(collection), default: [:]][id] = Array(id.utf8)
        }
    }
}

extension JournalRecord {
    /// The section and item ids the record names.
    var ids: [String] {
        switch self {
        case .put(_, _, let sections, _):
            return sections.flatMap { [$0.id] + $0.items.map(\.id) }
        case .ops(_, let ops, _):
            return ops.flatMap(\.ids)
        case .upsert(_, let id, _, let section, _, _, _):
            return [id] + (section?.id.map { [$0] } ?? [])
        case .delete, .defineView, .deleteView:
            return []
        }
    }
}

extension Op {
    fileprivate var ids: [String] {
        switch self {
        case .insertSections(_, let sections): sections.flatMap { [$0.id] + $0.items.map(\.id) }
        case .deleteSections(let sections): sections.compactMap(\.id)
        case .moveSection(let section, _), .updateSection(let section, _): section.id.map { [$0] } ?? []
        case .insertItems(let at, let items): (at.section.id.map { [$0] } ?? []) + items.map(\.id)
        case .deleteItems(let items): items.flatMap(\.ids)
        case .moveItem(let item, let to): item.ids + (to.section.id.map { [$0] } ?? [])
        case .updateItems(let items): items.map(\.id)
        }
    }
}

extension SectionRef {
    fileprivate var id: String? {
        if case .id(let id) = self { return id }
        return nil
    }
}

extension ItemRef {
    fileprivate var ids: [String] {
        switch self {
        case .id(let id): [id]
        case .path(let section, _): section.id.map { [$0] } ?? []
        }
    }
}
