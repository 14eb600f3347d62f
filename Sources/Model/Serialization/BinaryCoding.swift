/// Writes a little-endian binary form of values: what the server's journal records and snapshots are made of.
package struct BinaryWriter: Sendable {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    package mutating func byte(_ value: UInt8) { bytes.append(value) }

    package mutating func uint32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func uint64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func int(_ value: Int) { uint64(UInt64(bitPattern: Int64(value))) }

    /// A length-prefixed byte string.
    package mutating func blob(_ value: [UInt8]) {
        uint32(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    /// A length-prefixed string: its UTF-8 bytes appended straight from the string (no array in between).
    package mutating func string(_ value: String) {
        uint32(UInt32(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
    }

    package mutating func optionalString(_ value: String?) {
        byte(value == nil ? 0 : 1)
        if let value { string(value) }
    }

    package mutating func raw(_ other: [UInt8]) { bytes.append(contentsOf: other) }

    package mutating func sections(_ sections: [Section]) {
        uint32(UInt32(sections.count))
        for section in sections {
            string(section.id)
            blob(section.data.bytes)
            items(section.items)
        }
    }

    package mutating func items(_ items: [Item]) {
        uint32(UInt32(items.count))
        for item in items {
            string(item.id)
            blob(item.data.bytes)
        }
    }
}

/// Reads what `BinaryWriter` wrote; every read is bounds-checked and a short or malformed input throws.
package struct BinaryReader: Sendable {
    /// The input is short or not what was expected.
    package struct Malformed: Error, Sendable {
        package init() {}
    }

    private let bytes: [UInt8]
    package private(set) var offset: Int

    package init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package var isAtEnd: Bool { offset == bytes.count }

    package mutating func byte() throws(Malformed) -> UInt8 {
        guard offset < bytes.count else { throw Malformed() }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func uint32() throws(Malformed) -> UInt32 {
        guard bytes.count - offset >= 4 else { throw Malformed() }
        var value: UInt32 = 0
        for shift in 0..<4 { value |= UInt32(bytes[offset + shift]) << (8 * shift) }
        offset += 4
        return value
    }

    package mutating func uint64() throws(Malformed) -> UInt64 {
        let low = UInt64(try uint32())
        let high = UInt64(try uint32())
        return low | high << 32
    }

    package mutating func int() throws(Malformed) -> Int { Int(Int64(bitPattern: try uint64())) }

    package mutating func blob() throws(Malformed) -> [UInt8] {
        let count = Int(try uint32())
        guard bytes.count - offset >= count else { throw Malformed() }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    package mutating func string() throws(Malformed) -> String {
        guard let text = String(validating: try blob(), as: UTF8.self) else { throw Malformed() }
        return text
    }

    package mutating func optionalString() throws(Malformed) -> String? {
        try byte() == 0 ? nil : try string()
    }

    /// A count of elements that are each at least `minimumSize` bytes, checked against what is left, so that a
    /// corrupt count cannot make the reader reserve absurd amounts of memory.
    package mutating func count(minimumSize: Int) throws(Malformed) -> Int {
        let count = Int(try uint32())
        guard count <= (bytes.count - offset) / max(1, minimumSize) else { throw Malformed() }
        return count
    }

    package mutating func sections() throws(Malformed) -> [Section] {
        let count = try count(minimumSize: 12)
        var sections: [Section] = []
        sections.reserveCapacity(count)
        for _ in 0..<count {
            sections.append(Section(id: try string(), data: JSONData(canonical: try blob()), items: try items()))
        }
        return sections
    }

    package mutating func items() throws(Malformed) -> [Item] {
        let count = try count(minimumSize: 8)
        var items: [Item] = []
        items.reserveCapacity(count)
        for _ in 0..<count { items.append(Item(id: try string(), data: JSONData(canonical: try blob()))) }
        return items
    }
}
