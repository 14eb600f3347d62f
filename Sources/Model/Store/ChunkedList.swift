/// An ordered list of handles stored in chunks of at most `maximumChunk`, with a Fenwick tree over the chunk
/// sizes: finding the handle at an index, or the index of a handle, costs O(log n + chunk), and inserting or
/// removing one O(log n + chunk) amortized (a split or merge, once per hundreds of edits of a chunk, rebuilds the
/// tree in O(n / chunk)). Chunks have stable ids: the owner remembers, for each handle, the id of the chunk
/// holding it (the operations that move handles to another chunk say which chunk to re-read).
struct ChunkedList: Sendable {
    static let maximumChunk = 1024

    private(set) var count = 0
    /// Chunk contents by chunk id; freed ids are reused.
    private var chunks: [[Int32]] = []
    private var freeChunks: [Int32] = []
    /// Chunk ids in list order; the order position of each chunk id (-1 when free).
    private var order: [Int32] = []
    private var positions: [Int32] = []
    /// A Fenwick tree (1-based) over the sizes of the chunks in list order.
    private var tree: [Int] = [0]

    init() {}

    /// Builds the list from handles in order, with chunks half full.
    /// - Parameter placed: called with each handle and the id of the chunk holding it.
    /// - Complexity: O(n).
    init(_ handles: some Collection<Int32>, placed: (Int32, Int32) -> Void) {
        // A short list's one chunk is made to its size (a section of one item took 4 KiB for its room to grow, 1 GB
        // for 250,000 such sections); it grows by doubling, as an array does, if it ever grows.
        let isShort = handles.count < ChunkedList.maximumChunk / 2
        var chunk = isShort ? [] : ChunkedList.emptyChunk()
        chunk.reserveCapacity(isShort ? handles.count : 0)
        for handle in handles {
            chunk.append(handle)
            placed(handle, Int32(chunks.count))
            if chunk.count == ChunkedList.maximumChunk / 2 {
                chunks.append(chunk)
                chunk = ChunkedList.emptyChunk()
            }
        }
        if !chunk.isEmpty { chunks.append(chunk) }
        order = (0..<Int32(chunks.count)).map { $0 }
        count = handles.count
        reindex()
    }

    /// The handles in order.
    /// - Complexity: O(n).
    var elements: some Collection<Int32> { order.lazy.flatMap { chunks[Int($0)] } }

    /// The handles a chunk holds, for re-reading after an operation reported it.
    func elements(ofChunk chunk: Int32) -> [Int32] { chunks[Int(chunk)] }

    /// - Complexity: O(log n).
    subscript(index: Int) -> Int32 {
        let (position, offset) = locate(index)
        return chunks[Int(order[position])][offset]
    }

    /// The index of `handle`, which is in chunk `chunk`.
    /// - Complexity: O(log n + chunk).
    func index(of handle: Int32, inChunk chunk: Int32) -> Int {
        sizes(before: Int(positions[Int(chunk)])) + chunks[Int(chunk)].firstIndex(of: handle)!
    }

    /// Inserts `handle` at `index` (`count` appends).
    /// - Returns: the chunk now holding `handle`, and a chunk whose handles all moved there (after a split).
    /// - Complexity: O(log n + chunk) amortized.
    mutating func insert(_ handle: Int32, at index: Int) -> (chunk: Int32, moved: Int32?) {
        count += 1
        guard !order.isEmpty else {
            var chunk = [handle]
            let id = newChunk(&chunk)
            order.append(id)
            reindex()
            return (id, nil)
        }
        let last = order.count - 1
        var (position, offset) =
            index == count - 1 ? (last, chunks[Int(order[last])].count) : locate(index)
        var id = order[position]
        chunks[Int(id)].insert(handle, at: offset)
        add(1, at: position)
        guard chunks[Int(id)].count > ChunkedList.maximumChunk else { return (id, nil) }
        let half = chunks[Int(id)].count / 2
        var tail = ChunkedList.emptyChunk()
        tail.append(contentsOf: chunks[Int(id)][half...])
        chunks[Int(id)].removeSubrange(half...)
        let tailID = newChunk(&tail)
        order.insert(tailID, at: position + 1)
        reindex()
        if offset >= half {
            offset -= half
            id = tailID
        }
        return (id, tailID)
    }

    /// Removes the handle at `index`.
    /// - Returns: the handle, and a chunk whose handles all moved there (after a merge).
    /// - Complexity: O(log n + chunk) amortized.
    mutating func remove(at index: Int) -> (handle: Int32, moved: Int32?) {
        let (position, offset) = locate(index)
        let id = order[position]
        let handle = chunks[Int(id)].remove(at: offset)
        add(-1, at: position)
        count -= 1
        let size = chunks[Int(id)].count
        if size == 0 {
            releaseChunk(at: position)
            reindex()
            return (handle, nil)
        }
        guard size < ChunkedList.maximumChunk / 4, position + 1 < order.count,
            size + chunks[Int(order[position + 1])].count <= ChunkedList.maximumChunk / 2
        else { return (handle, nil) }
        let next = order[position + 1]
        chunks[Int(id)].append(contentsOf: chunks[Int(next)])
        releaseChunk(at: position + 1)
        reindex()
        return (handle, id)
    }

    /// An empty chunk with room for the most it may hold before it splits, so that no insertion reallocates it.
    private static func emptyChunk() -> [Int32] {
        var chunk: [Int32] = []
        chunk.reserveCapacity(maximumChunk + 1)
        return chunk
    }

    private mutating func newChunk(_ contents: inout [Int32]) -> Int32 {
        if let id = freeChunks.popLast() {
            swap(&chunks[Int(id)], &contents)
            return id
        }
        chunks.append(contents)
        return Int32(chunks.count - 1)
    }

    private mutating func releaseChunk(at position: Int) {
        let id = order.remove(at: position)
        chunks[Int(id)] = []
        freeChunks.append(id)
    }

    /// Rebuilds the chunk positions and the tree after the chunk order changed.
    /// - Complexity: O(n / chunk).
    private mutating func reindex() {
        positions = [Int32](repeating: -1, count: chunks.count)
        tree = [Int](repeating: 0, count: order.count + 1)
        for (position, id) in order.enumerated() {
            positions[Int(id)] = Int32(position)
            tree[position + 1] += chunks[Int(id)].count
            let parent = position + 1 + ((position + 1) & -(position + 1))
            if parent <= order.count { tree[parent] += tree[position + 1] }
        }
    }

    private mutating func add(_ delta: Int, at position: Int) {
        var node = position + 1
        while node < tree.count {
            tree[node] += delta
            node += node & -node
        }
    }

    /// The number of handles in the chunks before order position `position`.
    private func sizes(before position: Int) -> Int {
        var total = 0
        var node = position
        while node > 0 {
            total += tree[node]
            node &= node - 1
        }
        return total
    }

    /// The order position of the chunk holding `index`, and the offset there: a descent of the tree.
    private func locate(_ index: Int) -> (position: Int, offset: Int) {
        precondition(index >= 0 && index < count, "index \(index) out of range")
        var node = 0
        var remaining = index
        var step = 1
        while step * 2 < tree.count { step *= 2 }
        while step > 0 {
            if node + step < tree.count, tree[node + step] <= remaining {
                node += step
                remaining -= tree[node]
            }
            step /= 2
        }
        return (node, remaining)
    }
}
