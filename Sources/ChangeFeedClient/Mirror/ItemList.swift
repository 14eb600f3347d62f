import Model

/// The items of one mirrored section, in chunks of 64 to 128, so that inserting or removing one item moves
/// at most a chunk's worth of memory however long the section is. A batch visits its positions in ascending
/// order through a `Cursor`, so locating them costs one pass over the chunks for the whole batch.
struct ItemList: Hashable, Sendable {
    /// Chunks are built this full and split when they reach twice it: small enough that an insertion or removal
    /// moves about 1 KiB, large enough that a batch passes a million items in some 16,000 steps.
    static let chunkSize = 64

    private(set) var chunks: [[Item]]
    /// The size of each chunk, kept apart so that walking the chunks touches no chunk's storage.
    private var sizes: [Int]
    private(set) var count: Int
    /// Whether a removal may have emptied a chunk since the last `dropEmptyChunks()`.
    private var mayHaveEmptyChunks = false

    /// No items (shared storage: no allocation).
    static let empty = ItemList([])

    /// The items in order, chunked.
    /// - Complexity: O(n).
    init(_ items: [Item]) {
        var chunks: [[Item]] = []
        chunks.reserveCapacity(items.count / Self.chunkSize + 1)
        var start = 0
        while start < items.count {
            let end = min(start + Self.chunkSize, items.count)
            chunks.append(Array(items[start..<end]))
            start = end
        }
        self.chunks = chunks
        self.sizes = chunks.map(\.count)
        self.count = items.count
    }

    /// The items in order.
    /// - Complexity: O(n).
    var items: [Item] { Array(chunks.joined()) }

    /// A position in the chunks: the chunk and the index of its first item. Valid while a batch moves forward.
    struct Cursor {
        var chunk = 0
        var start = 0
    }

    /// Moves `cursor` to the chunk holding `index` (or, when `forInsertion`, the chunk `index` may be inserted
    /// into, which includes the position just past its end).
    /// - Complexity: O(chunks passed).
    private func seek(_ index: Int, _ cursor: inout Cursor, forInsertion: Bool) {
        while cursor.chunk < sizes.count {
            let end = cursor.start + sizes[cursor.chunk]
            if index < end || (forInsertion && index == end) { return }
            cursor.start = end
            cursor.chunk += 1
        }
    }

    /// The item at `index` (< count), found from `cursor` forward.
    func item(at index: Int, from cursor: inout Cursor) -> Item {
        seek(index, &cursor, forInsertion: false)
        return chunks[cursor.chunk][index - cursor.start]
    }

    /// The item at `index` (< count).
    /// - Complexity: O(chunks).
    subscript(index: Int) -> Item {
        var cursor = Cursor()
        return item(at: index, from: &cursor)
    }

    /// Replaces the data of the item at `index` (< count).
    mutating func setData(_ data: JSONData, at index: Int, from cursor: inout Cursor) {
        seek(index, &cursor, forInsertion: false)
        chunks[cursor.chunk][index - cursor.start].data = data
    }

    /// Removes the item at `index` (< count).
    /// - Complexity: O(chunks passed + chunk size).
    mutating func remove(at index: Int, from cursor: inout Cursor) -> Item {
        seek(index, &cursor, forInsertion: false)
        count -= 1
        sizes[cursor.chunk] -= 1
        if sizes[cursor.chunk] == 0 { mayHaveEmptyChunks = true }
        return chunks[cursor.chunk].remove(at: index - cursor.start)
    }

    /// Inserts `item` at `index` (≤ count).
    /// - Complexity: O(chunks passed + chunk size), amortized.
    mutating func insert(_ item: Item, at index: Int, from cursor: inout Cursor) {
        if chunks.isEmpty {
            chunks.append([])
            sizes.append(0)
        }
        seek(index, &cursor, forInsertion: true)
        if cursor.chunk == chunks.count {
            cursor.chunk -= 1
            cursor.start -= sizes[cursor.chunk]
        }
        chunks[cursor.chunk].insert(item, at: index - cursor.start)
        count += 1
        sizes[cursor.chunk] += 1
        if sizes[cursor.chunk] >= 2 * Self.chunkSize {
            let tail = Array(chunks[cursor.chunk][Self.chunkSize...])
            chunks[cursor.chunk].removeSubrange(Self.chunkSize...)
            chunks.insert(tail, at: cursor.chunk + 1)
            sizes[cursor.chunk] = Self.chunkSize
            sizes.insert(tail.count, at: cursor.chunk + 1)
        }
    }

    /// Drops the chunks that removals emptied, if any.
    /// - Complexity: O(chunks) when a chunk was emptied, else O(1).
    mutating func dropEmptyChunks() {
        guard mayHaveEmptyChunks else { return }
        chunks.removeAll { $0.isEmpty }
        sizes.removeAll { $0 == 0 }
        mayHaveEmptyChunks = false
    }
}
