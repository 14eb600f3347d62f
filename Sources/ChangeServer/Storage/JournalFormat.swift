import Model

/// The journal's file format. A segment starts with a 16-byte header: the magic `CSJOURN1`, the format version
/// (UInt32, little-endian) and four reserved bytes. Records follow, each framed as its payload length (UInt32),
/// a CRC-32C (UInt32), then the payload (`RecordCodec`). The checksum covers the frame's offset in the file
/// (UInt64) followed by the payload: a frame only checks out where it was written, so bytes that a client put
/// inside a payload can never pass for a record of their own when recovery looks past a torn one.
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

    /// The frame of `payload` written at `offset` in its segment.
    static func frame(_ payload: [UInt8], at offset: Int) -> [UInt8] {
        var writer = BinaryWriter(capacity: payload.count + frameHeaderSize)
        writer.uint32(UInt32(payload.count))
        writer.uint32(CRC32C.checksum(payload, continuing: seed(offset)))
        writer.raw(payload)
        return writer.bytes
    }

    private static func seed(_ offset: Int) -> UInt32 {
        withUnsafeBytes(of: UInt64(offset).littleEndian) { CRC32C.checksum($0) }
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
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<start + length]), continuing: seed(offset))
        }
        guard valid == checksum else { return nil }
        return (Array(bytes[start..<start + length]), start + length)
    }
}
