/// What changed between two versions of a collection, before the rules of a changeset apply
/// (`docs/changesets.md#the-rules`): the touched sections and items with their old and new places. Everything
/// not listed is unchanged, and the untouched elements of every sequence keep their relative order. Built from
/// two snapshots (`FullDiff`) or from a change log (`LogDelta`); turned into a `Changeset` by
/// `assembleChangeset`.
///
/// Sections are named by small integer keys (`sectionIDs[key]` is the id) so that assembling never hashes strings.
struct Delta {
    /// A section inserted, deleted or moved: its old and new indices, where it is present.
    struct SectionEntry {
        var key: Int
        var old: Int?
        var new: Int?
    }

    /// Where an item is: its section's key and its index there (stored in 32 bits each: a delta may hold a
    /// million of them).
    struct Place: Equatable {
        private var storedSection: Int32
        private var storedIndex: Int32

        init(section: Int, index: Int) {
            storedSection = Int32(section)
            storedIndex = Int32(index)
        }

        var section: Int { Int(storedSection) }
        var index: Int { Int(storedIndex) }
    }

    /// An item inserted, deleted or moved (`structural`), or whose data changed; its id is apart, in `itemIDs`,
    /// so that entries are plain values that cost nothing to copy.
    /// For an item that is only `dataChanged`, `old` may be unknown (nil); `new` is always known.
    struct ItemEntry {
        var old: Place?
        var new: Place?
        var structural: Bool
        var dataChanged: Bool
    }

    /// Section ids by key.
    private(set) var sectionIDs: [String] = []
    /// New section indices by key; nil for a section absent from the new version.
    private(set) var sectionNewIndex: [Int?] = []
    /// Old and new item counts by key, for every section present in both versions that is the old or new
    /// section of a structural item entry.
    var itemCounts: [(old: Int, new: Int)?] = []
    var oldSectionCount = 0
    var sections: [SectionEntry] = []
    /// Keys of the sections present in both versions whose data changed.
    var changedSectionData: [Int] = []
    private(set) var items: [ItemEntry] = []
    /// The id of each entry of `items`.
    private(set) var itemIDs: [String] = []

    mutating func addItem(_ id: String, old: Place?, new: Place?, structural: Bool, dataChanged: Bool) {
        itemIDs.append(id)
        items.append(ItemEntry(old: old, new: new, structural: structural, dataChanged: dataChanged))
    }

    mutating func reserveItems(_ count: Int) {
        items.reserveCapacity(count)
        itemIDs.reserveCapacity(count)
    }

    /// Names a section with a new key.
    mutating func addSection(id: String, newIndex: Int?) -> Int {
        sectionIDs.append(id)
        sectionNewIndex.append(newIndex)
        itemCounts.append(nil)
        return sectionIDs.count - 1
    }
}
