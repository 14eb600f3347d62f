import Model

extension RecordCodec {
    /// What orders an encoded record in a shared journal: the collection's name; for a view's records, the name
    /// of its source collection (the new source for a definition, the current one, `viewSource(view)`, for a
    /// deletion), so that every server applies them at the same point of their source's records and reaches the
    /// same view versions; `view:` and the view's name when a deleted view's source is unknown. Nil when the
    /// bytes are not a record.
    /// - Complexity: O(length of the name) for collections; a definition is decoded.
    static func sequenceKey(of record: [UInt8], viewSource: (String) -> String?) -> String? {
        var reader = BinaryReader(record)
        do throws(BinaryReader.Malformed) {
            let kind = try reader.byte()
            let name = try reader.string()
            if Kind.definesView(kind) {
                guard case .defineView(_, _, let json, _, _) = try decode(record),
                    let definition = try? ViewDefinition(json: json.bytes)
                else { return nil }
                return definition.source
            }
            if kind == Kind.deleteView.rawValue { return viewSource(name) ?? LaneRouter.lane(ofView: name) }
            return name
        } catch {
            return nil
        }
    }
}

extension RecordCodec {
    /// Whether the encoded record deletes a collection (what makes its records worth purging once it is gone).
    /// - Complexity: O(1).
    static func deletesCollection(_ record: [UInt8]) -> Bool { record.first == Kind.delete.rawValue }

    /// Whether the encoded record defines or deletes a view (whose records are stored under its sources' names).
    /// - Complexity: O(1).
    static func isViewRecord(_ record: [UInt8]) -> Bool {
        Kind.definesView(record.first) || record.first == Kind.deleteView.rawValue
    }
}
