/// A sorted set of order keys, each with an id, with ranks: the order-statistic structure under a live view.
///
/// Elements are kept in sorted chunks of at most `maximumChunk`, with a Fenwick tree over the chunk sizes.
/// Finding a key's chunk is a binary search over the chunks' last keys, then one inside the chunk; the rank
/// adds the sizes of the chunks before (the tree). Each element, and each chunk's last key, carries the first
/// eight bytes of its key as an integer, which settles most comparisons without reading the key itself (a
/// cache miss each). Inserting or removing costs O(log n + chunk) amortized (a
/// split, merge or emptied chunk rebuilds the tree, O(n / chunk), once per many edits of a chunk). Chunks are
/// small (a quarter to a whole of 128 elements of 32 bytes) so that an edit moves a few kilobytes at most, and
/// have room for 129 from the start so that an edit never reallocates one.
struct OrderedIndex: Sendable {
    struct Element: Sendable {
        var key: [UInt8]
        var id: String
        /// The first eight bytes of `key`, big-endian, zero-padded.
        let head: UInt64

        init(key: [UInt8], id: String) {
            self.key = key
            self.id = id
            head = OrderedIndex.head(of: key)
        }
    }

    /// A key and its head, for searching.
    private struct Probe {
        let key: [UInt8]
        let head: UInt64

        /// Whether the element sorts before this probe.
        func isAfter(_ element: Element) -> Bool {
            element.head != head ? element.head < head : OrderKey.less(element.key, key)
        }
    }

    static func head(of key: [UInt8]) -> UInt64 {
        var head: UInt64 = 0
        for index in 0..<8 { head = head << 8 | UInt64(index < key.count ? key[index] : 0) }
        return head
    }

    static let maximumChunk = 128

    private var chunks: [[Element]] = []
    /// The last element of each chunk.
    private var lasts: [Element] = []
    /// A Fenwick tree (1-based) over the chunk sizes.
    private var tree: [Int] = [0]
    private(set) var count = 0

    init() {}

    /// Builds the index from elements sorted by key, with unique keys.
    /// - Complexity: O(n).
    init(sorted elements: [Element]) {
        var start = 0
        chunks.reserveCapacity(elements.count / (OrderedIndex.maximumChunk / 2) + 1)
        while start < elements.count {
            let end = min(start + OrderedIndex.maximumChunk / 2, elements.count)
            chunks.append(OrderedIndex.chunk(elements[start..<end]))
            start = end
        }
        count = elements.count
        rebuild()
    }

    /// The elements in order.
    /// - Complexity: O(n).
    var elements: some Collection<Element> { chunks.lazy.flatMap { $0 } }

    /// The number of elements whose key sorts before `key`.
    /// - Complexity: O(log n).
    func rank(of key: [UInt8]) -> Int {
        guard !chunks.isEmpty else { return 0 }
        let probe = Probe(key: key, head: OrderedIndex.head(of: key))
        let chunk = chunkPosition(for: probe)
        return sizes(before: chunk) + offset(of: probe, in: chunk)
    }

    /// Whether an element has this key.
    /// - Complexity: O(log n).
    func contains(_ key: [UInt8]) -> Bool {
        guard !chunks.isEmpty else { return false }
        let probe = Probe(key: key, head: OrderedIndex.head(of: key))
        let chunk = chunkPosition(for: probe)
        let offset = offset(of: probe, in: chunk)
        return offset < chunks[chunk].count && chunks[chunk][offset].key == key
    }

    /// The element of rank `rank`.
    /// - Precondition: `0 <= rank < count`.
    /// - Complexity: O(log n).
    subscript(rank: Int) -> Element {
        precondition(rank >= 0 && rank < count, "rank \(rank) out of range")
        var node = 0
        var remaining = rank
        var step = 1
        while step * 2 < tree.count { step *= 2 }
        while step > 0 {
            if node + step < tree.count, tree[node + step] <= remaining {
                node += step
                remaining -= tree[node]
            }
            step /= 2
        }
        return chunks[node][remaining]
    }

    /// Inserts an element whose key is not in the index.
    /// - Returns: its rank.
    /// - Complexity: O(log n + chunk) amortized.
    @discardableResult
    mutating func insert(_ element: Element) -> Int {
        count += 1
        guard !chunks.isEmpty else {
            chunks = [OrderedIndex.chunk(CollectionOfOne(element))]
            rebuild()
            return 0
        }
        let probe = Probe(key: element.key, head: element.head)
        let chunk = chunkPosition(for: probe)
        let offset = offset(of: probe, in: chunk)
        let rank = sizes(before: chunk) + offset
        chunks[chunk].insert(element, at: offset)
        if offset == chunks[chunk].count - 1 { lasts[chunk] = element }
        if chunks[chunk].count > OrderedIndex.maximumChunk {
            let half = chunks[chunk].count / 2
            let tail = OrderedIndex.chunk(chunks[chunk][half...])
            chunks[chunk].removeSubrange(half...)
            chunks.insert(tail, at: chunk + 1)
            rebuild()
        } else {
            add(1, at: chunk)
        }
        return rank
    }

    /// Removes the element with this key.
    /// - Returns: its rank, or nil when there is none.
    /// - Complexity: O(log n + chunk) amortized.
    @discardableResult
    mutating func remove(_ key: [UInt8]) -> Int? {
        guard !chunks.isEmpty else { return nil }
        let probe = Probe(key: key, head: OrderedIndex.head(of: key))
        let chunk = chunkPosition(for: probe)
        let offset = offset(of: probe, in: chunk)
        guard offset < chunks[chunk].count, chunks[chunk][offset].key == key else { return nil }
        let rank = sizes(before: chunk) + offset
        chunks[chunk].remove(at: offset)
        count -= 1
        if let last = chunks[chunk].last, offset == chunks[chunk].count { lasts[chunk] = last }
        if chunks[chunk].isEmpty {
            chunks.remove(at: chunk)
            rebuild()
        } else if chunks[chunk].count < OrderedIndex.maximumChunk / 4, chunk + 1 < chunks.count,
            chunks[chunk].count + chunks[chunk + 1].count <= OrderedIndex.maximumChunk / 2
        {
            chunks[chunk].append(contentsOf: chunks[chunk + 1])
            chunks.remove(at: chunk + 1)
            rebuild()
        } else {
            add(-1, at: chunk)
        }
        return rank
    }

    /// A chunk holding `elements`, with room for the most it may hold before it splits, so that no insertion
    /// into it reallocates.
    private static func chunk(_ elements: some Collection<Element>) -> [Element] {
        var chunk: [Element] = []
        chunk.reserveCapacity(maximumChunk + 1)
        chunk.append(contentsOf: elements)
        return chunk
    }

    /// The first chunk whose last key is not below the probe's, or the last chunk.
    private func chunkPosition(for probe: Probe) -> Int {
        lasts.withUnsafeBufferPointer { lasts in
            var low = 0
            var high = lasts.count - 1
            while low < high {
                let middle = (low + high) / 2
                if probe.isAfter(lasts[middle]) { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    /// The position in chunk `chunk` of the first element whose key is not below the probe's.
    private func offset(of probe: Probe, in chunk: Int) -> Int {
        chunks[chunk].withUnsafeBufferPointer { elements in
            var low = 0
            var high = elements.count
            while low < high {
                let middle = (low + high) / 2
                if probe.isAfter(elements[middle]) { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    /// Rebuilds the chunks' last elements and the tree, after chunks were added or removed.
    private mutating func rebuild() {
        lasts = chunks.compactMap(\.last)
        tree = [Int](repeating: 0, count: chunks.count + 1)
        for (position, chunk) in chunks.enumerated() {
            let node = position + 1
            tree[node] += chunk.count
            let parent = node + (node & -node)
            if parent < tree.count { tree[parent] += tree[node] }
        }
    }

    private mutating func add(_ delta: Int, at position: Int) {
        var node = position + 1
        while node < tree.count {
            tree[node] += delta
            node += node & -node
        }
    }

    private func sizes(before position: Int) -> Int {
        var total = 0
        var node = position
        while node > 0 {
            total += tree[node]
            node &= node - 1
        }
        return total
    }
}
