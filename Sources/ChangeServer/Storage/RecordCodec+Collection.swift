import Model

extension RecordCodec {
    /// What orders an encoded record in a shared journal, read from its header without decoding the rest: the
    /// collection's name, or `view:` and the view's name (no collection name holds a `:`); nil when the bytes are
    /// not a record.
    /// - Complexity: O(length of the name).
    static func sequenceKey(of record: [UInt8]) -> String? {
        var reader = BinaryReader(record)
        do throws(BinaryReader.Malformed) {
            let kind = try reader.byte()
            let name = try reader.string()
            return kind == Kind.defineView.rawValue || kind == Kind.deleteView.rawValue
                ? LaneRouter.lane(ofView: name) : name
        } catch {
            return nil
        }
    }
}
