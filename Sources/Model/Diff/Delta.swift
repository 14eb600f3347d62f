/// What changed between two versions of a collection, before the rules of a changeset are applied: the
/// touched sections and items with their old and new places. Everything not listed is unchanged, and the
/// untouched elements of every sequence keep their relative order. Built from two snapshots (`FullDiff`) or
/// from a change log (`LogDelta`); turned into a `Changeset` by `assembleChangeset`.
struct Delta {
    /// A section inserted, deleted or moved: its old and new indices, where it is present.
    struct SectionEntry {
        var id: String
        var old: Int?
        var new: Int?
    }

    /// Where an item is: its section's id and its index there.
    struct Place: Equatable {
        var section: String
        var index: Int
    }

    /// An item inserted, deleted or moved (`structural`), or whose data changed.
    /// For an item that is only `dataChanged`, `old` may be unknown (nil); `new` is always known.
    struct ItemEntry {
        var id: String
        var old: Place?
        var new: Place?
        var structural: Bool
        var dataChanged: Bool
    }

    var oldSectionCount = 0
    var sections: [SectionEntry] = []
    /// Ids of the sections present in both versions whose data changed.
    var changedSectionData: [String] = []
    var items: [ItemEntry] = []
    /// Old and new item counts of every section present in both versions that is the old or new section of a
    /// structural item entry.
    var itemCounts: [String: (old: Int, new: Int)] = [:]
}

/// Read access to the new version of a collection, which the changeset's inserts and updates quote.
protocol SectionSource {
    var sectionCount: Int { get }
    func sectionIndex(of id: String) -> Int?
    func sectionID(at index: Int) -> String
    func sectionData(at index: Int) -> JSONData
    func section(at index: Int) -> Section
    func item(at path: IndexPath) -> Item
}

extension Store: SectionSource {}
