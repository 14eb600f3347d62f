/// An ordered list of handles stored in chunks of at most `maximumChunk`, so that inserting, removing and
/// finding the index of a handle cost O(n / chunk + chunk) instead of O(n). Chunks have stable ids: the owner
/// remembers, for each handle, the id of the chunk holding it (the operations that move handles to another
/// chunk say which chunk to re-read).
struct ChunkedList: Sendable {
    static let maximumChunk = 1024

    private(set) var count = 0
    /// Chunk contents by chunk id; freed ids are reused.
    private var chunks: [[Int32]] = []
    private var freeChunks: [Int32] = []
    /// Chunk ids in list order, and their sizes.
    private var order: [Int32] = []
    private var sizes: [Int32] = []

    init() {}

    /// Builds the list from handles in order, with chunks half full.
    /// - Parameter placed: called with each handle and the id of the chunk holding it.
    /// - Complexity: O(n).
    init(_ handles: some Collection<Int32>, placed: (Int32, Int32) -> Void) {
        var chunk: [Int32] = []
        for handle in handles {
            chunk.append(handle)
            placed(handle, Int32(chunks.count))
            if chunk.count == ChunkedList.maximumChunk / 2 { appendChunk(&chunk) }
        }
        if !chunk.isEmpty { appendChunk(&chunk) }
        count = handles.count
    }

    private mutating func appendChunk(_ chunk: inout [Int32]) {
        order.append(Int32(chunks.count))
        sizes.append(Int32(chunk.count))
        chunks.append(chunk)
        chunk = []
    }

    /// The handles in order.
    /// - Complexity: O(n).
    var elements: some Collection<Int32> { order.lazy.flatMap { chunks[Int($0)] } }

    /// The handles a chunk holds, for re-reading after an operation reported it.
    func elements(ofChunk chunk: Int32) -> [Int32] { chunks[Int(chunk)] }

    /// - Complexity: O(n / chunk).
    subscript(index: Int) -> Int32 {
        let (position, offset) = locate(index)
        return chunks[Int(order[position])][offset]
    }

    /// The index of `handle`, which is in chunk `chunk`.
    /// - Complexity: O(n / chunk + chunk).
    func index(of handle: Int32, inChunk chunk: Int32) -> Int {
        var before = 0
        for position in order.indices {
            if order[position] == chunk { return before + chunks[Int(chunk)].firstIndex(of: handle)! }
            before += Int(sizes[position])
        }
        preconditionFailure("chunk \(chunk) is not in the list")
    }

    /// Inserts `handle` at `index` (`count` appends).
    /// - Returns: the chunk now holding `handle`, and a chunk whose handles all moved there (after a split).
    /// - Complexity: O(n / chunk + chunk).
    mutating func insert(_ handle: Int32, at index: Int) -> (chunk: Int32, moved: Int32?) {
        count += 1
        guard !order.isEmpty else {
            var chunk = [handle]
            let id = newChunk(&chunk)
            order.append(id)
            sizes.append(1)
            return (id, nil)
        }
        var (position, offset) = index == count - 1 ? (order.count - 1, Int(sizes[order.count - 1])) : locate(index)
        var id = order[position]
        chunks[Int(id)].insert(handle, at: offset)
        sizes[position] += 1
        guard chunks[Int(id)].count > ChunkedList.maximumChunk else { return (id, nil) }
        let half = chunks[Int(id)].count / 2
        var tail = Array(chunks[Int(id)][half...])
        chunks[Int(id)].removeSubrange(half...)
        let tailID = newChunk(&tail)
        order.insert(tailID, at: position + 1)
        sizes[position] = Int32(half)
        sizes.insert(Int32(chunks[Int(tailID)].count), at: position + 1)
        if offset >= half {
            offset -= half
            id = tailID
        }
        return (id, tailID)
    }

    /// Removes the handle at `index`.
    /// - Returns: the handle, and a chunk whose handles all moved there (after a merge).
    /// - Complexity: O(n / chunk + chunk).
    mutating func remove(at index: Int) -> (handle: Int32, moved: Int32?) {
        let (position, offset) = locate(index)
        let id = order[position]
        let handle = chunks[Int(id)].remove(at: offset)
        sizes[position] -= 1
        count -= 1
        if sizes[position] == 0 {
            releaseChunk(at: position)
            return (handle, nil)
        }
        let size = Int(sizes[position])
        guard size < ChunkedList.maximumChunk / 4, position + 1 < order.count,
            size + Int(sizes[position + 1]) <= ChunkedList.maximumChunk / 2
        else { return (handle, nil) }
        let next = order[position + 1]
        chunks[Int(id)].append(contentsOf: chunks[Int(next)])
        sizes[position] += sizes[position + 1]
        releaseChunk(at: position + 1)
        return (handle, id)
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
        sizes.remove(at: position)
        chunks[Int(id)] = []
        freeChunks.append(id)
    }

    /// The position in `order` of the chunk holding `index`, and the offset there.
    private func locate(_ index: Int) -> (position: Int, offset: Int) {
        var offset = index
        for position in sizes.indices {
            let size = Int(sizes[position])
            if offset < size { return (position, offset) }
            offset -= size
        }
        preconditionFailure("index \(index) out of range")
    }
}
