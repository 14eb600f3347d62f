/// Read access to the new version of a collection, which the changeset's inserts and updates quote.
protocol SectionSource {
    var sectionCount: Int { get }
    func sectionID(at index: Int) -> String
    func sectionData(at index: Int) -> JSONData
    func section(at index: Int) -> Section
    func item(at path: ItemPath) -> Item
}

extension Store: SectionSource {}

/// A snapshot read as the new version of a diff.
struct SnapshotSource: SectionSource {
    let sections: [Section]

    var sectionCount: Int { sections.count }
    func sectionID(at index: Int) -> String { sections[index].id }
    func sectionData(at index: Int) -> JSONData { sections[index].data }
    func section(at index: Int) -> Section { sections[index] }
    func item(at path: ItemPath) -> Item { sections[path.section].items[path.item] }
}
