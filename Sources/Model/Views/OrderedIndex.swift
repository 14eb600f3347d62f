/// A sorted set of order keys, each with an id, with ranks: the order-statistic structure under a live view.
///
/// Elements are kept in sorted chunks of at most `maximumChunk`, with a Fenwick tree over the chunk sizes.
/// Finding a key's chunk is a binary search over the chunks' last keys, then one inside the chunk; the rank
/// adds the sizes of the chunks before (the tree). Inserting or removing costs O(log n + chunk) amortized (a
/// split, merge or emptied chunk rebuilds the tree, O(n / chunk), once per many edits of a chunk).
struct OrderedIndex: Sendable {
    struct Element: Sendable {
        var key: [UInt8]
        var id: String
    }

    static let maximumChunk = 512

    private var chunks: [[Element]] = []
    /// A Fenwick tree (1-based) over the chunk sizes.
    private var tree: [Int] = [0]
    private(set) var count = 0

    init() {}

    /// Builds the index from elements sorted by key, with unique keys.
    /// - Complexity: O(n).
    init(sorted elements: [Element]) {
        var start = 0
        while start < elements.count {
            let end = min(start + OrderedIndex.maximumChunk / 2, elements.count)
            chunks.append(Array(elements[start..<end]))
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
        let chunk = chunkPosition(for: key)
        return sizes(before: chunk) + offset(of: key, in: chunks[chunk])
    }

    /// Whether an element has this key.
    /// - Complexity: O(log n).
    func contains(_ key: [UInt8]) -> Bool {
        guard !chunks.isEmpty else { return false }
        let chunk = chunks[chunkPosition(for: key)]
        let offset = offset(of: key, in: chunk)
        return offset < chunk.count && chunk[offset].key == key
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
            chunks = [[element]]
            rebuild()
            return 0
        }
        let chunk = chunkPosition(for: element.key)
        let offset = offset(of: element.key, in: chunks[chunk])
        let rank = sizes(before: chunk) + offset
        chunks[chunk].insert(element, at: offset)
        if chunks[chunk].count > OrderedIndex.maximumChunk {
            let half = chunks[chunk].count / 2
            let tail = Array(chunks[chunk][half...])
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
        let chunk = chunkPosition(for: key)
        let offset = offset(of: key, in: chunks[chunk])
        guard offset < chunks[chunk].count, chunks[chunk][offset].key == key else { return nil }
        let rank = sizes(before: chunk) + offset
        chunks[chunk].remove(at: offset)
        count -= 1
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

    /// The first chunk whose last key is not below `key`, or the last chunk.
    private func chunkPosition(for key: [UInt8]) -> Int {
        var low = 0
        var high = chunks.count - 1
        while low < high {
            let middle = (low + high) / 2
            if let last = chunks[middle].last, OrderKey.less(last.key, key) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The position in `chunk` of the first element whose key is not below `key`.
    private func offset(of key: [UInt8], in chunk: [Element]) -> Int {
        var low = 0
        var high = chunk.count
        while low < high {
            let middle = (low + high) / 2
            if OrderKey.less(chunk[middle].key, key) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private mutating func rebuild() {
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
