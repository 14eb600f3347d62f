/// A sorted set of order keys, each with an id, with ranks: the order-statistic structure under a live view.
///
/// Elements are kept in sorted chunks of at most `maximumChunk`, with a Fenwick tree over the chunk sizes.
/// Finding a key's chunk is a binary search over the chunks' last keys, then one inside the chunk; the rank
/// adds the sizes of the chunks before (the tree). Each chunk's last key carries the first eight bytes of its key
/// as an integer, and each element the eight bytes that follow the prefix all keys of its chunk share (`prefixes`):
/// neighbours in a chunk often share far more than eight bytes (a section and a first sort key), and these
/// integers settle most comparisons without reading the key itself (a cache miss each). Inserting or removing
/// costs O(log n + chunk) amortized (a
/// split, merge or emptied chunk rebuilds the tree, O(n / chunk), once per many edits of a chunk). Chunks are
/// small (a quarter to a whole of 128 elements of 32 bytes) so that an edit moves a few kilobytes at most, and
/// have room for 129 from the start so that an edit never reallocates one (but for the one chunk of a short index).
struct OrderedIndex: Sendable {
    struct Element: Sendable {
        var key: [UInt8]
        var id: String
        /// In the index, the eight bytes of `key` after its chunk's prefix, big-endian, zero-padded.
        fileprivate(set) var head: UInt64 = 0

        init(key: [UInt8], id: String) {
            self.key = key
            self.id = id
        }
    }

    /// A chunk's last key, with its first eight bytes.
    private struct Last {
        let key: [UInt8]
        let head: UInt64

        init(_ key: [UInt8]) {
            self.key = key
            head = OrderedIndex.head(of: key)
        }
    }

    /// A key and its first eight bytes, for searching.
    private struct Probe {
        let key: [UInt8]
        let head: UInt64

        /// Whether the chunk's last key sorts before this probe.
        func isAfter(_ last: Last) -> Bool {
            last.head != head ? last.head < head : OrderKey.less(last.key, key)
        }
    }

    /// The eight bytes of `key` from `start`, big-endian, zero-padded.
    static func head(of key: [UInt8], from start: Int = 0) -> UInt64 {
        key.withUnsafeBufferPointer { key in
            if start + 8 <= key.count {
                return UInt64(
                    bigEndian: UnsafeRawBufferPointer(key).loadUnaligned(fromByteOffset: start, as: UInt64.self))
            }
            var head: UInt64 = 0
            for index in start..<(start + 8) { head = head << 8 | UInt64(index < key.count ? key[index] : 0) }
            return head
        }
    }

    /// How many first bytes `a` and `b` share.
    private static func sharedLength(_ a: [UInt8], _ b: [UInt8]) -> Int {
        let common = min(a.count, b.count)
        var at = 0
        while at < common, a[at] == b[at] { at += 1 }
        return at
    }

    static let maximumChunk = 128

    private var chunks: [[Element]] = []
    /// The bytes every key of each chunk starts with (a chunk's first and last keys share at least these).
    private var prefixes: [[UInt8]] = []
    /// The last key of each chunk.
    private var lasts: [Last] = []
    /// A Fenwick tree (1-based) over the chunk sizes.
    private var tree: [Int] = [0]
    private(set) var count = 0

    init() {}

    /// Builds the index from elements sorted by key, with unique keys.
    /// - Complexity: O(n).
    init(sorted elements: some Sequence<Element>) {
        var chunk: [Element] = []
        // Room for a whole chunk and one more, so that an edit never reallocates it; but a short index's one
        // chunk is made to its size (a view of a few items took 4 KiB for each of its two indexes), and grows by
        // doubling, as an array does, if it ever grows.
        let known = elements.underestimatedCount
        var room = known < OrderedIndex.maximumChunk / 2 ? known : OrderedIndex.maximumChunk + 1
        for element in elements {
            if chunk.isEmpty {
                chunk.reserveCapacity(room)
                room = OrderedIndex.maximumChunk + 1
            }
            chunk.append(element)
            if chunk.count == OrderedIndex.maximumChunk / 2 { append(chunk: &chunk) }
        }
        if !chunk.isEmpty { append(chunk: &chunk) }
        rebuild()
    }

    /// Appends the elements of `chunk` (the next in order) as a chunk, and empties `chunk` for the next.
    private mutating func append(chunk: inout [Element]) {
        let prefix = OrderedIndex.takeHeads(of: &chunk)
        count += chunk.count
        chunks.append(chunk)
        prefixes.append(prefix)
        chunk = []
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
            let (chunk, prefix) = OrderedIndex.chunk(CollectionOfOne(element))
            chunks = [chunk]
            prefixes = [prefix]
            rebuild()
            return 0
        }
        let probe = Probe(key: element.key, head: OrderedIndex.head(of: element.key))
        let chunk = chunkPosition(for: probe)
        let offset = offset(of: probe, in: chunk)
        let rank = sizes(before: chunk) + offset
        place(element, at: offset, in: chunk)
        if offset == chunks[chunk].count - 1 { lasts[chunk] = Last(element.key) }
        if chunks[chunk].count > OrderedIndex.maximumChunk {
            let half = chunks[chunk].count / 2
            let (head, headPrefix) = OrderedIndex.chunk(chunks[chunk][..<half])
            let (tail, tailPrefix) = OrderedIndex.chunk(chunks[chunk][half...])
            chunks[chunk] = head
            prefixes[chunk] = headPrefix
            chunks.insert(tail, at: chunk + 1)
            prefixes.insert(tailPrefix, at: chunk + 1)
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
        if let last = chunks[chunk].last, offset == chunks[chunk].count { lasts[chunk] = Last(last.key) }
        if chunks[chunk].isEmpty {
            chunks.remove(at: chunk)
            prefixes.remove(at: chunk)
            rebuild()
        } else if chunks[chunk].count < OrderedIndex.maximumChunk / 4, chunk + 1 < chunks.count,
            chunks[chunk].count + chunks[chunk + 1].count <= OrderedIndex.maximumChunk / 2
        {
            (chunks[chunk], prefixes[chunk]) = OrderedIndex.chunk(chunks[chunk] + chunks[chunk + 1])
            chunks.remove(at: chunk + 1)
            prefixes.remove(at: chunk + 1)
            rebuild()
        } else {
            add(-1, at: chunk)
        }
        return rank
    }

    /// A chunk holding `elements` (sorted), with room for the most it may hold before it splits, so that no
    /// insertion into it reallocates; and the prefix its keys share, after which its elements' heads are taken.
    private static func chunk(_ elements: some Collection<Element>) -> ([Element], [UInt8]) {
        var chunk: [Element] = []
        chunk.reserveCapacity(maximumChunk + 1)
        chunk.append(contentsOf: elements)
        let prefix = takeHeads(of: &chunk)
        return (chunk, prefix)
    }

    /// Sets the head of every element of `chunk` (sorted) to the eight bytes of its key after the prefix all its
    /// keys share (those its first and last keys share), and returns that prefix.
    private static func takeHeads(of chunk: inout [Element]) -> [UInt8] {
        guard let first = chunk.first, let last = chunk.last else { return [] }
        let prefix = Array(first.key[..<sharedLength(first.key, last.key)])
        for position in chunk.indices { chunk[position].head = head(of: chunk[position].key, from: prefix.count) }
        return prefix
    }

    /// Inserts `element` at `offset` in chunk `chunk`, where it sorts; when its key does not start with the
    /// chunk's prefix, the prefix is shortened and every head of the chunk taken again.
    private mutating func place(_ element: Element, at offset: Int, in chunk: Int) {
        var element = element
        let shared = OrderedIndex.sharedLength(element.key, prefixes[chunk])
        if shared < prefixes[chunk].count {
            prefixes[chunk].removeSubrange(shared...)
            chunks[chunk].withUnsafeMutableBufferPointer { elements in
                for position in elements.indices {
                    elements[position].head = OrderedIndex.head(of: elements[position].key, from: shared)
                }
            }
        }
        element.head = OrderedIndex.head(of: element.key, from: shared)
        chunks[chunk].insert(element, at: offset)
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

    /// The position in chunk `chunk` of the first element whose key is not below the probe's. A probe without
    /// the chunk's prefix sorts before all its keys or after them; one with it is compared by the heads after
    /// the prefix, then by whole keys.
    private func offset(of probe: Probe, in chunk: Int) -> Int {
        let key = probe.key
        let prefix = prefixes[chunk]
        let shared = OrderedIndex.sharedLength(key, prefix)
        guard shared == prefix.count else {
            return shared < key.count && key[shared] > prefix[shared] ? chunks[chunk].count : 0
        }
        let head = OrderedIndex.head(of: key, from: shared)
        return chunks[chunk].withUnsafeBufferPointer { elements in
            var low = 0
            var high = elements.count
            while low < high {
                let middle = (low + high) / 2
                let element = elements[middle]
                let isBefore = element.head != head ? element.head < head : OrderKey.less(element.key, key)
                if isBefore { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    /// Rebuilds the chunks' last elements and the tree, after chunks were added or removed.
    private mutating func rebuild() {
        lasts = chunks.compactMap { $0.last.map { Last($0.key) } }
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
