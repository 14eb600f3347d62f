import Glibc
import Model

/// The snapshot of every collection and view (content, version, kept history) that lets the journal segments
/// before `nextSegment` be dropped. Format: the magic `CSSNAPS1`, the format version (UInt32), four reserved bytes,
/// `nextSegment` (UInt64), the collection count (UInt32), each collection's name and encoded form; from version 2
/// on the view count (UInt32) and each view's name, definition (canonical JSON) and encoded content; then the
/// CRC-32C (UInt32) of everything before it. Version 1 files (no views) are still read.
enum SnapshotFile {
    static let magic = Array("CSSNAPS1".utf8)
    static let version: UInt32 = 2

    /// A view as a snapshot keeps it; its index is rebuilt from its source at recovery.
    struct SavedView: Sendable {
        var name: String
        var definition: JSONData
        var content: VersionedCollection
    }

    struct Contents {
        var nextSegment: UInt64
        var collections: [(name: String, content: VersionedCollection)]
        var views: [SavedView]
    }

    static func encode(
        nextSegment: UInt64, collections: [(name: String, content: VersionedCollection)], views: [SavedView]
    ) -> [UInt8] {
        var writer = BinaryWriter(capacity: 1 << 16)
        writer.raw(magic)
        writer.uint32(version)
        writer.uint32(0)
        writer.uint64(nextSegment)
        writer.uint32(UInt32(collections.count))
        for collection in collections {
            writer.string(collection.name)
            collection.content.encode(into: &writer)
        }
        writer.uint32(UInt32(views.count))
        for view in views {
            writer.string(view.name)
            writer.blob(view.definition.bytes)
            view.content.encode(into: &writer)
        }
        let checksum = CRC32C.checksum(writer.bytes)
        writer.uint32(checksum)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8], limits: HistoryLimits) throws(BinaryReader.Malformed) -> Contents {
        guard isWhole(bytes) else { throw BinaryReader.Malformed() }
        var reader = BinaryReader(Array(bytes[..<(bytes.count - 4)]), offset: 8)
        let format = try reader.uint32()
        guard format == 1 || format == version else { throw BinaryReader.Malformed() }
        _ = try reader.uint32()
        let nextSegment = try reader.uint64()
        let count = try reader.count(minimumSize: 16)
        var collections: [(name: String, content: VersionedCollection)] = []
        for _ in 0..<count {
            let name = try reader.string()
            collections.append((name, try VersionedCollection(decoding: &reader, limits: limits)))
        }
        var views: [SavedView] = []
        if format >= 2 {
            for _ in 0..<(try reader.count(minimumSize: 16)) {
                let name = try reader.string()
                let definition = JSONData(canonical: try reader.blob())
                views.append(
                    SavedView(
                        name: name, definition: definition,
                        content: try VersionedCollection(decoding: &reader, limits: limits)))
            }
        }
        guard reader.isAtEnd else { throw BinaryReader.Malformed() }
        return Contents(nextSegment: nextSegment, collections: collections, views: views)
    }

    /// Whether `bytes` start with the magic and end with the CRC-32C of everything before it.
    private static func isWhole(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 28, Array(bytes[..<8]) == magic else { return false }
        var trailer = BinaryReader(bytes, offset: bytes.count - 4)
        let valid = bytes.withUnsafeBytes {
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[..<(bytes.count - 4)]))
        }
        return (try? trailer.uint32()) == valid
    }

    /// The format of a whole, intact snapshot (its checksum holds) of a format this build does not read because it
    /// is newer: written by a later build, which an operator rolled back from. Nil for any other file.
    static func newerFormat(of bytes: [UInt8]) -> UInt32? {
        guard isWhole(bytes) else { return nil }
        var reader = BinaryReader(bytes, offset: 8)
        guard let format = try? reader.uint32(), format > version else { return nil }
        return format
    }

    /// Writes the snapshot to a temporary file, syncs it, renames it into place and syncs the directory, so that
    /// a crash leaves either the old snapshot or the new one, whole.
    static func write(_ bytes: [UInt8], in directory: DataDirectory) -> String? {
        directory.writeDurably(bytes, to: directory.snapshotPath)
    }
}

extension ViewRegistry {
    /// The views `source` feeds, as a snapshot keeps them; call it on the source's lane, where they change.
    func saved(feedingFrom source: String) -> [SnapshotFile.SavedView] {
        views(of: source).map { view in
            view.live.withLock {
                SnapshotFile.SavedView(name: view.name, definition: $0.definition.canonicalJSON, content: $0.collection)
            }
        }
    }
}
