import Model

extension RecordCodec {
    /// The view an encoded record defines or deletes, and whether it deletes it; nil for other records.
    /// - Complexity: O(length of the name).
    static func viewChange(_ record: [UInt8]) -> (view: String, deletes: Bool)? {
        var reader = BinaryReader(record)
        do throws(BinaryReader.Malformed) {
            let kind = try reader.byte()
            guard kind == Kind.defineView.rawValue || kind == Kind.deleteView.rawValue else { return nil }
            return (try reader.string(), kind == Kind.deleteView.rawValue)
        } catch {
            return nil
        }
    }
}
