import Model

extension RecordCodec {
    /// The collection an encoded record is for, read from its header without decoding the rest; nil when the
    /// bytes are not a record.
    /// - Complexity: O(length of the name).
    static func collection(in record: [UInt8]) -> String? {
        var reader = BinaryReader(record)
        do throws(BinaryReader.Malformed) {
            _ = try reader.byte()
            return try reader.string()
        } catch {
            return nil
        }
    }
}
