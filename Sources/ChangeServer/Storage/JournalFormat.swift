import Model

/// The journal's file format. A segment starts with a 16-byte header: the magic `CSJOURN1`, the format version
/// (UInt32, little-endian) and four reserved bytes. Records follow, each framed as its payload length (UInt32),
/// a CRC-32C (UInt32), then the payload (`RecordCodec`). The checksum covers the frame's offset in the file
/// (UInt64) followed by the payload: a frame only checks out where it was written, so bytes that a client put
/// inside a payload can never pass for a record of their own when recovery looks past a torn one.
///
/// Version 2 adds two things. Sync marks: a frame whose payload is `markTag` and an offset (UInt64), written only
/// when every byte of its segment before that offset is known to be on disk (`mark(synced:)`). And zeros after the
/// last record, written ahead with `--fsync always` (`preallocation`), which end a segment (a frame is never empty).
/// A power loss during a sync over those zeros can keep a later sector of what was being written and lose an
/// earlier one; the marks are what tells that from damage to records already synced. Version 1 segments (no marks,
/// no zeros) are still read with their own rules (`Recovery`).
enum JournalFormat {
    static let magic = Array("CSJOURN1".utf8)
    /// The version new segments are written in; `versions` are those read.
    static let version: UInt32 = 2
    static let versions: ClosedRange<UInt32> = 1...2
    static let headerSize = 16
    static let frameHeaderSize = 8
    /// The largest payload a frame may claim; anything larger is corruption. Bodies are at most 1 GiB
    /// (`--max-body-bytes`), and a record is never much larger than its body.
    static let maximumPayload = 1 << 31
    /// Bytes of zeros kept written ahead of the last record with `--fsync always` (version 2). A sync after an
    /// append must also write the file's new size; after a write over bytes already there it writes the data alone,
    /// which took about two thirds of the time on this project's machines.
    static let preallocation = 1 << 20
    /// A sync mark's payload starts with these bytes. A record's payload starts with its kind (1 to 7,
    /// `JournalRecord.Kind`), never 0.
    static let markTag: [UInt8] = [0] + Array("SYNCED!".utf8)
    static let markPayloadSize = markTag.count + 8
    static let markFrameSize = frameHeaderSize + markPayloadSize

    static var header: [UInt8] { header(version: version) }

    static func header(version: UInt32) -> [UInt8] {
        var writer = BinaryWriter()
        writer.raw(magic)
        writer.uint32(version)
        writer.uint32(0)
        return writer.bytes
    }

    /// The format version of a segment starting with `bytes`, if they are a header of a version this build reads.
    static func version(ofHeader bytes: ArraySlice<UInt8>) -> UInt32? {
        versions.first { Array(bytes.prefix(headerSize)) == header(version: $0) }
    }

    /// The format version of a segment whose header is a journal's of a newer version than this build reads.
    static func newerVersion(ofHeader bytes: ArraySlice<UInt8>) -> UInt32? {
        guard bytes.count >= headerSize, bytes.prefix(magic.count).elementsEqual(magic) else { return nil }
        var reader = BinaryReader(Array(bytes.prefix(headerSize)), offset: magic.count)
        guard let version = try? reader.uint32(), version > versions.upperBound else { return nil }
        return version
    }

    /// Whether `bytes` are at most a header, cut short or whole, of a version this build reads.
    static func isHeaderPrefix(_ bytes: [UInt8]) -> Bool {
        bytes.count <= headerSize && versions.contains { header(version: $0).starts(with: bytes) }
    }

    /// The payload of a sync mark: every byte of its segment before `synced` is on disk.
    static func mark(synced: Int) -> [UInt8] {
        var writer = BinaryWriter(capacity: markPayloadSize)
        writer.raw(markTag)
        writer.uint64(UInt64(synced))
        return writer.bytes
    }

    /// The offset a sync mark's payload names, or nil if `payload` is not a sync mark.
    static func synced(byMark payload: [UInt8]) -> Int? {
        guard payload.count == markPayloadSize, payload.starts(with: markTag) else { return nil }
        var reader = BinaryReader(payload, offset: markTag.count)
        guard let synced = try? reader.uint64(), synced <= UInt64(Int.max) else { return nil }
        return Int(synced)
    }

    /// The frame of `payload` written at `offset` in its segment.
    static func frame(_ payload: [UInt8], at offset: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        appendFrame(payload, at: offset, to: &bytes)
        return bytes
    }

    /// Appends the frame of `payload` written at `offset` in its segment to `bytes`.
    static func appendFrame(_ payload: [UInt8], at offset: Int, to bytes: inout [UInt8]) {
        let checksum = CRC32C.checksum(payload, continuing: seed(offset))
        withUnsafeBytes(of: UInt32(payload.count).littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: checksum.littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: payload)
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

extension JournalFormat {
    /// Whether a whole frame with a matching checksum starts anywhere after `offset`: what tells a corrupt record
    /// followed by valid ones (which may have been acknowledged) from a torn tail.
    ///
    /// Looking at every offset with `payload(in:at:)` costs a checksum over the rest of the file at each one
    /// whose length field fits, quadratic in the size of the tear. Here an offset is a candidate only when its
    /// length field fits in what follows, and a candidate's checksum comes from `SpanChecksums` in constant
    /// time; only a candidate that checks out there is read again in full, and it is a frame.
    /// - Complexity: O(n) for the n bytes after `offset`, whatever they hold, plus O(m) for a frame of m bytes
    ///   found.
    static func hasFrame(in bytes: [UInt8], after offset: Int) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            guard let start = buffer.baseAddress, let first = candidate(start, buffer.count, from: offset + 1) else {
                return false
            }
            let spans = SpanChecksums(UnsafeRawBufferPointer(buffer), from: offset)
            return spans.withTables { tables in
                var next: Int? = first
                while let candidate = next {
                    if spans.frameMatches(start, at: candidate, tables), payload(in: bytes, at: candidate) != nil {
                        return true
                    }
                    next = Self.candidate(start, buffer.count, from: candidate + 1)
                }
                return false
            }
        }
    }

    /// The first offset from `offset` whose length field claims a payload that is not empty, not larger than
    /// `maximumPayload` and inside the `count` bytes.
    private static func candidate(_ bytes: UnsafePointer<UInt8>, _ count: Int, from offset: Int) -> Int? {
        var candidate = offset
        while candidate + frameHeaderSize < count {
            // The length's top byte alone rules out most offsets (text, for one) without reading the other three.
            if Int(bytes[candidate + 3]) <= (count - candidate - frameHeaderSize) >> 24 {
                let length = lengthField(bytes, at: candidate)
                if length > 0 && length <= maximumPayload && length <= count - candidate - frameHeaderSize {
                    return candidate
                }
            }
            candidate += 1
        }
        return nil
    }

    /// Whether a whole sync mark after `offset` names an offset past it: then the bytes at `offset` were on disk
    /// before that mark was written, and a bad frame there is damage, not a write torn by a crash (version 2).
    /// - Complexity: O(n) for the n bytes after `offset`: a mark has a fixed length, so an offset is looked at
    ///   further only when its length field is that length.
    static func hasMark(in bytes: [UInt8], syncedPast offset: Int) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            guard let start = buffer.baseAddress else { return false }
            var candidate = offset + 1
            while candidate <= buffer.count - markFrameSize {
                if lengthField(start, at: candidate) == markPayloadSize,
                    let (payload, _) = payload(in: bytes, at: candidate), let synced = synced(byMark: payload),
                    synced > offset
                {
                    return true
                }
                candidate += 1
            }
            return false
        }
    }

    /// The UInt32 at `offset`, little-endian, read by hand (this runs once per byte searched).
    static func lengthField(_ bytes: UnsafePointer<UInt8>, at offset: Int) -> Int {
        Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24
    }
}

/// The CRC-32C of any span of one byte buffer in constant time, after one linear pass over it.
///
/// CRC-32C is linear over GF(2). Write `r(s, m)` for the register after feeding bytes `m` to a register that
/// holds `s` (`CRC32C.checksum(m, continuing: p)` is `~r(~p, m)`); then `r(s, a + b) = r(r(s, a), b)` and
/// `r(s, m) = s·x^(8|m|) ⊕ r(0, m)`, products taken modulo the CRC polynomial. With the prefix registers
/// `P(i) = r(0, bytes[base..<i])`, the register over `bytes[i..<j]` started from `s` is
/// `(s ⊕ P(i))·x^(8(j-i)) ⊕ P(j)`. `P` is kept at every 8th position (half the buffer's size in memory), so
/// each prefix is at most 7 byte steps from a kept one, and `x^(8k)` is the product of two table entries.
struct SpanChecksums {
    private static let stride = 8
    private let base: Int
    private let kept: [UInt32]

    /// The tables that the checks read, for the length of one `withTables` call.
    struct Tables {
        let bytes: UnsafePointer<UInt32>
        let low: UnsafePointer<UInt32>
        let high: UnsafePointer<UInt32>
        let kept: UnsafePointer<UInt32>
    }

    /// Prefix registers of `bytes[base...]`.
    /// - Complexity: O(n) for the n bytes after `base`.
    init(_ bytes: UnsafeRawBufferPointer, from base: Int) {
        self.base = base
        var kept = [UInt32](repeating: 0, count: (bytes.count - base) / Self.stride + 1)
        CRC32CAlgebra.table.withUnsafeBufferPointer { table in
            kept.withUnsafeMutableBufferPointer { kept in
                var register: UInt32 = 0
                var index = base
                while index < bytes.count {
                    if (index - base) % Self.stride == 0 { kept[(index - base) / Self.stride] = register }
                    register = (register >> 8) ^ table[Int((register ^ UInt32(bytes[index])) & 0xFF)]
                    index += 1
                }
                if (bytes.count - base) % Self.stride == 0 { kept[(bytes.count - base) / Self.stride] = register }
            }
        }
        self.kept = kept
    }

    func withTables<Result>(_ body: (Tables) -> Result) -> Result {
        CRC32CAlgebra.table.withUnsafeBufferPointer { table in
            CRC32CAlgebra.lowPowers.withUnsafeBufferPointer { low in
                CRC32CAlgebra.highPowers.withUnsafeBufferPointer { high in
                    kept.withUnsafeBufferPointer { kept in
                        // The four arrays are never empty.
                        guard let table = table.baseAddress, let low = low.baseAddress,
                            let high = high.baseAddress, let kept = kept.baseAddress
                        else { preconditionFailure("empty CRC table") }
                        return body(Tables(bytes: table, low: low, high: high, kept: kept))
                    }
                }
            }
        }
    }

    /// What `CRC32C.checksum` gives for `bytes[range]` continuing `previous`; `range` lies after `base`.
    /// - Complexity: O(1).
    func checksum(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, continuing previous: UInt32) -> UInt32 {
        guard let start = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return previous }
        return withTables { tables in
            let register = ~previous ^ prefix(start, at: range.lowerBound, tables)
            return
                ~(CRC32CAlgebra.shift(register, bytes: range.count, tables)
                ^ prefix(start, at: range.upperBound, tables))
        }
    }

    /// Whether the frame header at `offset` (whose payload lies in the buffer) carries the checksum of its
    /// payload, seeded by `offset` as `JournalFormat.frame` does.
    /// - Complexity: O(1).
    func frameMatches(_ bytes: UnsafePointer<UInt8>, at offset: Int, _ tables: Tables) -> Bool {
        let length = JournalFormat.lengthField(bytes, at: offset)
        let stored = UInt32(truncatingIfNeeded: JournalFormat.lengthField(bytes, at: offset + 4))
        // The seed is the checksum of the offset (UInt64, little-endian); its complement is the register.
        var seed: UInt32 = 0xFFFF_FFFF
        var remaining = UInt64(offset)
        var step = 0
        while step < 8 {
            seed = (seed >> 8) ^ tables.bytes[Int((seed ^ UInt32(truncatingIfNeeded: remaining)) & 0xFF)]
            remaining >>= 8
            step += 1
        }
        let start = offset + JournalFormat.frameHeaderSize
        let register = CRC32CAlgebra.shift(seed ^ prefix(bytes, at: start, tables), bytes: length, tables)
        return ~(register ^ prefix(bytes, at: start + length, tables)) == stored
    }

    /// `P(position)`: the kept register before it, fed the bytes in between.
    private func prefix(_ bytes: UnsafePointer<UInt8>, at position: Int, _ tables: Tables) -> UInt32 {
        let slot = (position - base) / Self.stride
        var register = tables.kept[slot]
        var index = base + slot * Self.stride
        while index < position {
            register = (register >> 8) ^ tables.bytes[Int((register ^ UInt32(bytes[index])) & 0xFF)]
            index += 1
        }
        return register
    }
}

/// Arithmetic on CRC-32C registers as polynomials modulo the CRC polynomial, in the reflected bit order that
/// `CRC32C` uses: bit 31 is the coefficient of x^0, bit 0 that of x^31.
enum CRC32CAlgebra {
    /// The Castagnoli polynomial, reflected, as in `CRC32C`.
    private static let polynomial: UInt32 = 0x82F6_3B78
    private static let one: UInt32 = 0x8000_0000

    /// The register after feeding one byte `b` to a zero register: `table[b]`.
    static let table: [UInt32] = (0..<256).map { byte in
        var register = UInt32(byte)
        for _ in 0..<8 { register = register & 1 == 1 ? (register >> 1) ^ polynomial : register >> 1 }
        return register
    }

    /// `x^(8k)` for k below 2^16.
    static let lowPowers: [UInt32] = {
        var powers = [one]
        powers.reserveCapacity(1 << 16)
        while powers.count < 1 << 16 {
            let last = powers[powers.count - 1]
            powers.append((last >> 8) ^ table[Int(last & 0xFF)])
        }
        return powers
    }()

    /// `x^(8·2^16·k)` for k up to 2^15: with `lowPowers`, any shift up to 2^31 bytes in two products.
    static let highPowers: [UInt32] = {
        let last = lowPowers[lowPowers.count - 1]
        let step = (last >> 8) ^ table[Int(last & 0xFF)]
        var powers = [one]
        powers.reserveCapacity((1 << 15) + 1)
        table.withUnsafeBufferPointer { buffer in
            guard let table = buffer.baseAddress else { return }
            while powers.count <= 1 << 15 { powers.append(multiply(powers[powers.count - 1], step, table)) }
        }
        return powers
    }()

    /// `value·x^(8·count)`: the register `value` fed `count` zero bytes.
    /// - Complexity: O(1) for counts up to 2^31.
    static func shift(_ value: UInt32, bytes count: Int, _ tables: SpanChecksums.Tables) -> UInt32 {
        var value = value
        var count = count
        while count > 0 {
            let low = count & 0xFFFF
            let high = min(count >> 16, 1 << 15)
            if low > 0 { value = multiply(value, tables.low[low], tables.bytes) }
            if high > 0 { value = multiply(value, tables.high[high], tables.bytes) }
            count -= low + high << 16
        }
        return value
    }

    /// The product of two polynomials modulo the CRC polynomial, four bits of `a` at a time from its highest
    /// degree down (Horner): the running product times x^4, plus `b` times the nibble. Times x^4 is a shift by
    /// four bits, plus the reduction of the four bits shifted out, which is `table[bits << 4]` (a byte whose low
    /// four bits are zero passes its first four steps as a plain shift).
    static func multiply(_ a: UInt32, _ b: UInt32, _ table: UnsafePointer<UInt32>) -> UInt32 {
        let b1 = (b >> 1) ^ (polynomial & (0 &- (b & 1)))
        let b2 = (b1 >> 1) ^ (polynomial & (0 &- (b1 & 1)))
        let b3 = (b2 >> 1) ^ (polynomial & (0 &- (b2 & 1)))
        var a = a
        var product: UInt32 = 0
        var round = 0
        while round < 8 {
            // The nibble's bit 3 is its lowest degree, bit 0 its highest.
            product = (product >> 4) ^ table[Int(product & 0xF) << 4]
            product ^= (b & (0 &- ((a >> 3) & 1))) ^ (b1 & (0 &- ((a >> 2) & 1)))
            product ^= (b2 & (0 &- ((a >> 1) & 1))) ^ (b3 & (0 &- (a & 1)))
            a >>= 4
            round += 1
        }
        return product
    }
}
