import Model

/// The journal's file format. A segment starts with a 16-byte header: the magic `CSJOURN1`, the format version
/// (UInt32, little-endian) and four reserved bytes. Records follow, each framed as its payload length (UInt32),
/// the CRC-32C of the payload (UInt32), then the payload (`RecordCodec`).
enum JournalFormat {
    static let magic = Array("CSJOURN1".utf8)
    static let version: UInt32 = 1
    static let headerSize = 16
    static let frameHeaderSize = 8
    /// The largest payload a frame may claim; anything larger is corruption. Bodies are at most 1 GiB
    /// (`--max-body-bytes`), and a record is never much larger than its body.
    static let maximumPayload = 1 << 31

    static var header: [UInt8] {
        var writer = BinaryWriter()
        writer.raw(magic)
        writer.uint32(version)
        writer.uint32(0)
        return writer.bytes
    }

    static func frame(_ payload: [UInt8]) -> [UInt8] {
        var writer = BinaryWriter(capacity: payload.count + frameHeaderSize)
        writer.uint32(UInt32(payload.count))
        writer.uint32(CRC32C.checksum(payload))
        writer.raw(payload)
        return writer.bytes
    }

    /// The payload framed at `offset`, if a whole frame with a matching checksum is there.
    static func payload(in bytes: [UInt8], at offset: Int) -> (payload: [UInt8], end: Int)? {
        guard bytes.count - offset >= frameHeaderSize else { return nil }
        var reader = BinaryReader(bytes, offset: offset)
        guard let length = try? Int(reader.uint32()), let checksum = try? reader.uint32(), length > 0,
            length <= maximumPayload, length <= bytes.count - offset - frameHeaderSize
        else { return nil }
        let start = offset + frameHeaderSize
        let valid = bytes.withUnsafeBytes {
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<start + length]))
        }
        guard valid == checksum else { return nil }
        return (Array(bytes[start..<start + length]), start + length)
    }
}
