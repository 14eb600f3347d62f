import Model

extension RecordCodec {
    /// The view an encoded record defines or deletes, and whether it surely deletes it; nil for other records.
    /// A deletion with `If-Match` or `If-None-Match` may yet be refused when it is applied, after it is committed:
    /// it is not counted as one (a view wrongly taken for deleted would be dropped at the next start, which is
    /// worse than the rare case `changeserver_views` guards against).
    /// - Complexity: O(length of the name and conditions).
    static func viewChange(_ record: [UInt8]) -> (view: String, deletes: Bool)? {
        var reader = BinaryReader(record)
        do throws(BinaryReader.Malformed) {
            let kind = try reader.byte()
            guard kind == Kind.defineView.rawValue || kind == Kind.deleteView.rawValue else { return nil }
            let view = try reader.string()
            let ifMatch = try reader.optionalString()
            let ifNoneMatch = try reader.optionalString()
            let conditional = ifMatch != nil || ifNoneMatch != nil
            return (view, kind == Kind.deleteView.rawValue && !conditional)
        } catch {
            return nil
        }
    }
}
