/// The binary form of a whole collection: content, version and kept history, so that a server can snapshot it
/// and, after a restart, keep answering the change feed from versions its clients hold.
extension VersionedCollection {
    /// - Complexity: O(n + h) for n items and h kept changes.
    package func encode(into writer: inout BinaryWriter) {
        writer.string(version.epoch)
        writer.uint64(version.seq)
        writer.sections(store.snapshot())
        let entries = history.keptEntries
        writer.uint32(UInt32(entries.count))
        for entry in entries {
            writer.uint64(entry.version.seq)
            writer.uint32(UInt32(entry.changes.count))
            for change in entry.changes { change.encode(into: &writer) }
        }
    }

    /// Reads what `encode(into:)` wrote, keeping at most what `limits` allow of its history.
    /// - Complexity: O(n + h).
    package init(decoding reader: inout BinaryReader, limits: HistoryLimits) throws(BinaryReader.Malformed) {
        let epoch = try reader.string()
        guard Version.isValidEpoch(epoch) else { throw BinaryReader.Malformed() }
        let version = Version(epoch: epoch, seq: try reader.uint64())
        let store = Store(validated: try reader.sections())
        var history = History()
        let count = try reader.count(minimumSize: 12)
        var previous: UInt64?
        for _ in 0..<count {
            let seq = try reader.uint64()
            guard seq <= version.seq, previous.map({ $0 + 1 == seq }) ?? true else { throw BinaryReader.Malformed() }
            previous = seq
            let changeCount = try reader.count(minimumSize: 1)
            var changes: [Change] = []
            changes.reserveCapacity(changeCount)
            for _ in 0..<changeCount { changes.append(try Change(decoding: &reader)) }
            history.record(changes, committing: Version(epoch: epoch, seq: seq), limits: limits)
        }
        guard previous.map({ $0 == version.seq }) ?? true else { throw BinaryReader.Malformed() }
        self.init(store: store, version: version, history: history, limits: limits)
    }
}

extension History {
    /// The entries still kept, oldest first.
    var keptEntries: ArraySlice<Entry> {
        entries[head...]
    }
}

extension Change {
    private enum Tag: UInt8 {
        case sectionInserted = 1
        case sectionRemoved, sectionMoved, sectionDataSet, itemInserted, itemRemoved, itemMoved,
            itemDataSet, replaced
    }

    func encode(into writer: inout BinaryWriter) {
        switch self {
        case .sectionInserted(let id, let at):
            writer.byte(Tag.sectionInserted.rawValue)
            writer.string(id)
            writer.int(at)
        case .sectionRemoved(let id, let data, let at):
            writer.byte(Tag.sectionRemoved.rawValue)
            writer.string(id)
            writer.blob(data.bytes)
            writer.int(at)
        case .sectionMoved(let id, let from, let to):
            writer.byte(Tag.sectionMoved.rawValue)
            writer.string(id)
            writer.int(from)
            writer.int(to)
        case .sectionDataSet(let id, let old):
            writer.byte(Tag.sectionDataSet.rawValue)
            writer.string(id)
            writer.blob(old.bytes)
        case .itemInserted(let id, let section, let at):
            writer.byte(Tag.itemInserted.rawValue)
            writer.string(id)
            writer.string(section)
            writer.int(at)
        case .itemRemoved(let item, let section, let at):
            writer.byte(Tag.itemRemoved.rawValue)
            writer.items([item])
            writer.string(section)
            writer.int(at)
        case .itemMoved(let id, let from, let fromIndex, let to, let toIndex):
            writer.byte(Tag.itemMoved.rawValue)
            writer.string(id)
            writer.string(from)
            writer.int(fromIndex)
            writer.string(to)
            writer.int(toIndex)
        case .itemDataSet(let id, let old):
            writer.byte(Tag.itemDataSet.rawValue)
            writer.string(id)
            writer.blob(old.bytes)
        case .replaced(let old):
            writer.byte(Tag.replaced.rawValue)
            writer.sections(old)
        }
    }

    init(decoding reader: inout BinaryReader) throws(BinaryReader.Malformed) {
        guard let tag = Tag(rawValue: try reader.byte()) else { throw BinaryReader.Malformed() }
        switch tag {
        case .sectionInserted:
            self = .sectionInserted(id: try reader.string(), at: try reader.int())
        case .sectionRemoved:
            self = .sectionRemoved(
                id: try reader.string(), data: JSONData(canonical: try reader.blob()), at: try reader.int())
        case .sectionMoved:
            self = .sectionMoved(id: try reader.string(), from: try reader.int(), to: try reader.int())
        case .sectionDataSet:
            self = .sectionDataSet(id: try reader.string(), old: JSONData(canonical: try reader.blob()))
        case .itemInserted:
            self = .itemInserted(id: try reader.string(), section: try reader.string(), at: try reader.int())
        case .itemRemoved:
            let items = try reader.items()
            guard items.count == 1 else { throw BinaryReader.Malformed() }
            self = .itemRemoved(items[0], section: try reader.string(), at: try reader.int())
        case .itemMoved:
            self = .itemMoved(
                id: try reader.string(), from: try reader.string(), fromIndex: try reader.int(),
                to: try reader.string(),
                toIndex: try reader.int())
        case .itemDataSet:
            self = .itemDataSet(id: try reader.string(), old: JSONData(canonical: try reader.blob()))
        case .replaced:
            self = .replaced(old: try reader.sections())
        }
    }
}
