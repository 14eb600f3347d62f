import Model

extension RecordCodec {
    /// What a view's record does, as `changeserver_views` notes it.
    enum ViewNote: Int64 {
        case defines = 0
        case deletes = 1
        /// A record with `If-Match` or `If-None-Match`, which may yet be refused when it is applied, after it is
        /// committed: it leaves the note's `deleted` as it was. (A view wrongly taken for deleted would be dropped
        /// at the next start; a conditional deletion that was applied is, rarely, taken for none.)
        case mayBeRefused = 2
    }

    /// The view an encoded record defines or deletes, and what to note of it; nil for other records.
    /// - Complexity: O(length of the name and conditions).
    static func viewChange(_ record: [UInt8]) -> (view: String, note: ViewNote)? {
        var reader = BinaryReader(record)
        do throws(BinaryReader.Malformed) {
            let kind = try reader.byte()
            guard Kind.definesView(kind) || kind == Kind.deleteView.rawValue else { return nil }
            let view = try reader.string()
            let ifMatch = try reader.optionalString()
            let ifNoneMatch = try reader.optionalString()
            if ifMatch != nil || ifNoneMatch != nil { return (view, .mayBeRefused) }
            return (view, kind == Kind.deleteView.rawValue ? .deletes : .defines)
        } catch {
            return nil
        }
    }
}
