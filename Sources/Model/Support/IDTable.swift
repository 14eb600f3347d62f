/// A hash table from ids to positions in an array of ids (which the owner keeps): open addressing with linear
/// probing and a cheap seeded word-at-a-time hash. It matches a million ids several times faster than
/// `Dictionary<String, Int>` (whose SipHash and per-lookup hasher setup dominate a large diff), and takes 8 bytes
/// per slot. The full diff uses it to match ids; the store, to find items by id.
struct IDTable: Sendable {
    /// Per slot: the high 32 bits of the id's hash (which also pick its home slot, so that growing and removing
    /// never rehash a string) above position + 1; 0 when empty. One word per slot: a probe costs one cache miss.
    private var slots: [UInt64]
    private var mask: Int
    private(set) var count = 0

    /// A table for up to `capacity` ids before it grows.
    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        slots = [UInt64](repeating: 0, count: size)
        mask = size - 1
    }

    /// A table of `ids[position]` for each of `positions`; those ids must be unique. Hashes and first probes go
    /// in batches, so that the cache misses of a batch overlap instead of following one another.
    /// - Complexity: O(n) expected.
    init(positions: some RandomAccessCollection<Int>, of ids: [String]) {
        self.init(capacity: positions.count)
        var hashes = [UInt64](repeating: 0, count: IDTable.batch)
        var start = positions.startIndex
        while start != positions.endIndex {
            let end =
                positions.index(start, offsetBy: IDTable.batch, limitedBy: positions.endIndex) ?? positions.endIndex
            for (k, position) in positions[start..<end].enumerated() { hashes[k] = IDTable.hash(ids[position]) }
            var sum: UInt64 = 0
            for k in 0..<positions.distance(from: start, to: end) { sum &+= slots[home(hashes[k])] }
            touched = sum
            for (k, position) in positions[start..<end].enumerated() { place(hashes[k] & IDTable.tagBits, position) }
            start = end
        }
    }

    private static let batch = 32
    private static let tagBits: UInt64 = 0xFFFF_FFFF_0000_0000
    /// The sum of a batch's first slots: loading them first, independently, lets the processor overlap their misses.
    private var touched: UInt64 = 0

    private func home(_ hash: UInt64) -> Int { Int(truncatingIfNeeded: hash >> 32) & mask }

    private static func position(in slot: UInt64) -> Int { Int(truncatingIfNeeded: slot & 0xFFFF_FFFF) - 1 }

    /// Puts a tag and position in the first free slot from the tag's home.
    private mutating func place(_ tag: UInt64, _ position: Int) {
        var slot = home(tag)
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = tag | UInt64(position + 1)
        count += 1
    }

    /// The slot holding `id`, or nil.
    private func slot(of id: String, hash: UInt64, in ids: [String]) -> Int? {
        var slot = home(hash)
        while slots[slot] != 0 {
            if slots[slot] & IDTable.tagBits == hash & IDTable.tagBits,
                ids[IDTable.position(in: slots[slot])].hasSameBytes(as: id)
            {
                return slot
            }
            slot = (slot + 1) & mask
        }
        return nil
    }

    /// Inserts `ids[position]` unless an equal id is there, growing the table when it is half full.
    /// - Returns: the position of the equal id already there, or nil when inserted.
    /// - Complexity: O(1) amortized expected, O(length of the id).
    mutating func insert(_ position: Int, of ids: [String]) -> Int? {
        let hash = IDTable.hash(ids[position])
        if let slot = slot(of: ids[position], hash: hash, in: ids) { return IDTable.position(in: slots[slot]) }
        if (count + 1) * 2 > slots.count { grow() }
        place(hash & IDTable.tagBits, position)
        return nil
    }

    /// The position in `ids` of `id`, if inserted.
    /// - Complexity: O(1) expected, O(length of the id).
    func find(_ id: String, in ids: [String]) -> Int? {
        slot(of: id, hash: IDTable.hash(id), in: ids).map { IDTable.position(in: slots[$0]) }
    }

    /// Removes `id`, shifting back the entries after it that would otherwise become unreachable.
    /// - Complexity: O(1) expected, O(length of the id).
    mutating func remove(_ id: String, in ids: [String]) {
        guard var hole = slot(of: id, hash: IDTable.hash(id), in: ids) else { return }
        slots[hole] = 0
        count -= 1
        var next = (hole + 1) & mask
        while slots[next] != 0 {
            let wanted = home(slots[next])
            // The entry at `next` may fill the hole unless its home lies cyclically in (hole, next].
            let reachable = hole <= next ? (wanted > hole && wanted <= next) : (wanted > hole || wanted <= next)
            if !reachable {
                slots[hole] = slots[next]
                slots[next] = 0
                hole = next
            }
            next = (next + 1) & mask
        }
    }

    private mutating func grow() {
        let old = slots
        slots = [UInt64](repeating: 0, count: old.count * 2)
        mask = slots.count - 1
        count = 0
        for slot in old where slot != 0 { place(slot & IDTable.tagBits, IDTable.position(in: slot)) }
    }

    /// Seeds the hash per process, so that colliding ids cannot be prepared in advance.
    private static let seed = UInt64.random(in: .min ... .max)

    /// A seeded multiply-xorshift hash over the UTF-8 bytes, eight at a time.
    static func hash(_ id: String) -> UInt64 {
        var id = id
        return id.withUTF8 { bytes in
            var hash: UInt64 = seed ^ UInt64(bytes.count)
            var offset = 0
            while offset + 8 <= bytes.count, let base = bytes.baseAddress {
                let word = UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
                hash = (hash ^ word) &* 0xFF51_AFD7_ED55_8CCD
                hash ^= hash >> 29
                offset += 8
            }
            var tail: UInt64 = 0
            for byte in bytes[offset...].reversed() { tail = tail << 8 | UInt64(byte) }
            hash = (hash ^ tail) &* 0xC4CE_B9FE_1A85_EC53
            hash ^= hash >> 32
            hash = hash &* 0xFF51_AFD7_ED55_8CCD
            return hash ^ (hash >> 29)
        }
    }
}
