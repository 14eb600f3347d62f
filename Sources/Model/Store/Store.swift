/// The content of a collection: ordered sections of ordered items, with lookups by id and by position.
struct Store: Sendable {
    private var sections: [Section] = []
    private(set) var itemCount = 0

    init() {}

    /// - Precondition: ids are valid and unique.
    init(validated sections: [Section]) {
        self.sections = sections
        itemCount = sections.reduce(0) { $0 + $1.items.count }
    }

    var sectionCount: Int { sections.count }

    func sectionIndex(of id: String) -> Int? { sections.firstIndex { $0.id == id } }
    func sectionID(at index: Int) -> String { sections[index].id }
    func sectionData(at index: Int) -> JSONData { sections[index].data }
    func itemCount(inSection index: Int) -> Int { sections[index].items.count }
    func section(at index: Int) -> Section { sections[index] }
    func item(at path: IndexPath) -> Item { sections[path.section].items[path.item] }

    func location(ofItem id: String) -> IndexPath? {
        for (s, section) in sections.enumerated() {
            if let i = section.items.firstIndex(where: { $0.id == id }) { return IndexPath(section: s, item: i) }
        }
        return nil
    }

    func snapshot() -> [Section] { sections }

    mutating func insertSection(id: String, data: JSONData, at index: Int) {
        sections.insert(Section(id: id, data: data), at: index)
    }

    mutating func removeSection(at index: Int) {
        precondition(sections[index].items.isEmpty)
        sections.remove(at: index)
    }

    mutating func moveSection(from: Int, to: Int) {
        sections.insert(sections.remove(at: from), at: to)
    }

    mutating func setSectionData(_ data: JSONData, at index: Int) { sections[index].data = data }

    mutating func insertItem(_ item: Item, at path: IndexPath) {
        sections[path.section].items.insert(item, at: path.item)
        itemCount += 1
    }

    mutating func removeItem(at path: IndexPath) -> Item {
        itemCount -= 1
        return sections[path.section].items.remove(at: path.item)
    }

    mutating func moveItem(from: IndexPath, to: IndexPath) {
        let item = sections[from.section].items.remove(at: from.item)
        sections[to.section].items.insert(item, at: to.item)
    }

    mutating func setItemData(_ data: JSONData, at path: IndexPath) {
        sections[path.section].items[path.item].data = data
    }
}
