/// The content of a collection: ordered sections of ordered items, with lookups by id and by position.
///
/// Sections and items live in slots addressed by stable handles; each section keeps its items' handles in a
/// `ChunkedList`, and the section order is one too. A slot remembers its chunk, so the position of an id costs
/// one hash lookup and two chunked-list searches: every single-item edit and lookup is O(log n + chunk), never O(n).
struct Store: Sendable {
    private struct ItemSlot {
        var data: JSONData
        var section: Int32
        var chunk: Int32
    }

    private struct SectionSlot {
        var id: String
        var data: JSONData
        var items = ChunkedList()
        var chunk: Int32 = 0
    }

    private var items: [ItemSlot] = []
    /// Item ids by handle ("" for a free handle), and the table finding a handle by id.
    private var itemIDs: [String] = []
    private var itemHandles = IDTable(capacity: 0)
    private var freeItems: [Int32] = []
    private var sections: [SectionSlot] = []
    private var freeSections: [Int32] = []
    private var sectionHandles: [ExactString: Int32] = [:]
    private var order = ChunkedList()
    /// The bytes of the ids and data of its sections and items: about what its snapshot takes, encoded, beyond a
    /// few dozen bytes per item.
    private(set) var contentBytes = 0

    init() {}

    /// An empty store, to stand in for a store while it is edited elsewhere (swapped out, so that it stays
    /// uniquely referenced) without allocating one each time.
    static let empty = Store()

    /// - Precondition: ids are valid and unique.
    /// - Complexity: O(n).
    init(validated content: [Section]) {
        let itemTotal = content.reduce(0) { $0 + $1.items.count }
        sectionHandles.reserveCapacity(content.count)
        var sectionSlots: [SectionSlot] = []
        sectionSlots.reserveCapacity(content.count)
        var itemSlots: [ItemSlot] = []
        itemSlots.reserveCapacity(itemTotal)
        itemIDs.reserveCapacity(itemTotal)
        for section in content {
            let handle = Int32(sectionSlots.count)
            sectionHandles[ExactString(section.id)] = handle
            contentBytes += Self.bytes(section.id, section.data)
            let first = itemSlots.count
            for item in section.items {
                contentBytes += Self.bytes(item.id, item.data)
                itemIDs.append(item.id)
                itemSlots.append(ItemSlot(data: item.data, section: handle, chunk: 0))
            }
            let list = ChunkedList((Int32(first)..<Int32(itemSlots.count))) { itemSlots[Int($0)].chunk = $1 }
            sectionSlots.append(SectionSlot(id: section.id, data: section.data, items: list))
        }
        order = ChunkedList(Int32(0)..<Int32(sectionSlots.count)) { sectionSlots[Int($0)].chunk = $1 }
        items = itemSlots
        sections = sectionSlots
        itemHandles = IDTable(positions: itemIDs.indices, of: itemIDs)
    }

    private static func bytes(_ id: String, _ data: JSONData) -> Int { id.utf8.count + data.bytes.count }

    var sectionCount: Int { order.count }
    var itemCount: Int { itemHandles.count }

    /// - Complexity: O(1) hashing plus O(log n + chunk).
    func sectionIndex(of id: String) -> Int? {
        guard let handle = sectionHandles[ExactString(id)] else { return nil }
        return order.index(of: handle, inChunk: sections[Int(handle)].chunk)
    }

    private func section(_ index: Int) -> SectionSlot { sections[Int(order[index])] }

    func sectionID(at index: Int) -> String { section(index).id }
    func sectionData(at index: Int) -> JSONData { section(index).data }
    func itemCount(inSection index: Int) -> Int { section(index).items.count }

    /// - Complexity: O(items in the section).
    func section(at index: Int) -> Section {
        let slot = section(index)
        return Section(id: slot.id, data: slot.data, items: slot.items.elements.map { item(handle: $0) })
    }

    private func item(handle: Int32) -> Item { Item(id: itemIDs[Int(handle)], data: items[Int(handle)].data) }

    func item(at path: ItemPath) -> Item { item(handle: section(path.section).items[path.item]) }

    /// - Complexity: O(1) hashing plus O(log n + chunk).
    func location(ofItem id: String) -> ItemPath? {
        guard let position = itemHandles.find(id, in: itemIDs) else { return nil }
        let handle = Int32(position)
        let slot = items[Int(handle)]
        let section = sections[Int(slot.section)]
        return ItemPath(
            section: order.index(of: slot.section, inChunk: section.chunk),
            item: section.items.index(of: handle, inChunk: slot.chunk))
    }

    /// The data of the item with this id, without finding where it is.
    /// - Complexity: O(1) hashing.
    func data(ofItem id: String) -> JSONData? {
        itemHandles.find(id, in: itemIDs).map { items[$0].data }
    }

    /// - Complexity: O(n).
    func snapshot() -> [Section] { (0..<sectionCount).map { section(at: $0) } }

    /// How many item slots there are (items and free slots): the bound of `forEachItem(inSlots:)`.
    var itemSlotCount: Int { items.count }

    /// Calls `body` with the id and data of the items in the slots `slots` (of `0..<itemSlotCount`), in their
    /// order, not the content's: parts of the slots can be read on several threads at once.
    /// - Complexity: O(slots).
    @inline(__always)
    func forEachItem(inSlots slots: some Sequence<Int>, _ body: (String, JSONData) -> Void) {
        for slot in slots where !itemIDs[slot].isEmpty { body(itemIDs[slot], items[slot].data) }
    }

    /// Calls `body` with the slot and data of every item, in slot order.
    /// - Complexity: O(itemSlotCount).
    func forEachItemSlot(_ body: (Int, JSONData) -> Void) {
        for slot in 0..<items.count where !itemIDs[slot].isEmpty { body(slot, items[slot].data) }
    }

    mutating func insertSection(id: String, data: JSONData, at index: Int) {
        let slot = SectionSlot(id: id, data: data)
        contentBytes += Self.bytes(id, data)
        let handle: Int32
        if let free = freeSections.popLast() {
            handle = free
            sections[Int(handle)] = slot
        } else {
            handle = Int32(sections.count)
            sections.append(slot)
        }
        sectionHandles[ExactString(id)] = handle
        let placed = order.insert(handle, at: index)
        sections[Int(handle)].chunk = placed.chunk
        if let moved = placed.moved { relocateSections(inChunk: moved) }
    }

    /// - Precondition: the section is empty.
    mutating func removeSection(at index: Int) {
        let removed = order.remove(at: index)
        if let moved = removed.moved { relocateSections(inChunk: moved) }
        let handle = Int(removed.handle)
        precondition(sections[handle].items.count == 0, "removing a section that has items")
        sectionHandles[ExactString(sections[handle].id)] = nil
        contentBytes -= Self.bytes(sections[handle].id, sections[handle].data)
        sections[handle] = SectionSlot(id: "", data: .null)
        freeSections.append(removed.handle)
    }

    mutating func moveSection(from: Int, to: Int) {
        let removed = order.remove(at: from)
        if let moved = removed.moved { relocateSections(inChunk: moved) }
        let placed = order.insert(removed.handle, at: to)
        sections[Int(removed.handle)].chunk = placed.chunk
        if let moved = placed.moved { relocateSections(inChunk: moved) }
    }

    mutating func setSectionData(_ data: JSONData, at index: Int) {
        let handle = Int(order[index])
        contentBytes += data.bytes.count - sections[handle].data.bytes.count
        sections[handle].data = data
    }

    mutating func insertItem(_ item: Item, at path: ItemPath) {
        let section = order[path.section]
        let slot = ItemSlot(data: item.data, section: section, chunk: 0)
        contentBytes += Self.bytes(item.id, item.data)
        let handle: Int32
        if let free = freeItems.popLast() {
            handle = free
            items[Int(handle)] = slot
            itemIDs[Int(handle)] = item.id
        } else {
            handle = Int32(items.count)
            items.append(slot)
            itemIDs.append(item.id)
        }
        _ = itemHandles.insert(Int(handle), of: itemIDs)
        place(handle, in: section, at: path.item)
    }

    mutating func removeItem(at path: ItemPath) -> Item {
        let handle = unplace(from: order[path.section], at: path.item)
        let removed = item(handle: handle)
        contentBytes -= Self.bytes(removed.id, removed.data)
        itemHandles.remove(removed.id, in: itemIDs)
        items[Int(handle)] = ItemSlot(data: .null, section: -1, chunk: -1)
        itemIDs[Int(handle)] = ""
        freeItems.append(handle)
        return removed
    }

    /// Removes the item at `from`, then inserts it at `to` in the state after the removal.
    mutating func moveItem(from: ItemPath, to: ItemPath) {
        let handle = unplace(from: order[from.section], at: from.item)
        let section = order[to.section]
        items[Int(handle)].section = section
        place(handle, in: section, at: to.item)
    }

    mutating func setItemData(_ data: JSONData, at path: ItemPath) {
        let handle = Int(sections[Int(order[path.section])].items[path.item])
        contentBytes += data.bytes.count - items[handle].data.bytes.count
        items[handle].data = data
    }

    private mutating func place(_ handle: Int32, in section: Int32, at index: Int) {
        let placed = sections[Int(section)].items.insert(handle, at: index)
        items[Int(handle)].chunk = placed.chunk
        if let moved = placed.moved { relocateItems(of: section, inChunk: moved) }
    }

    private mutating func unplace(from section: Int32, at index: Int) -> Int32 {
        let removed = sections[Int(section)].items.remove(at: index)
        if let moved = removed.moved { relocateItems(of: section, inChunk: moved) }
        return removed.handle
    }

    private mutating func relocateItems(of section: Int32, inChunk chunk: Int32) {
        for handle in sections[Int(section)].items.elements(ofChunk: chunk) { items[Int(handle)].chunk = chunk }
    }

    private mutating func relocateSections(inChunk chunk: Int32) {
        for handle in order.elements(ofChunk: chunk) { sections[Int(handle)].chunk = chunk }
    }
}
