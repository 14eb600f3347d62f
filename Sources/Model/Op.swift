/// A reference to a section in a request: its index or its id.
public enum SectionRef: Hashable, Sendable {
    /// The section at this index.
    case index(Int)
    /// The section with this id.
    case id(String)
}

/// A reference to an item in a request: its id, or an index path whose section is itself a reference.
public enum ItemRef: Hashable, Sendable {
    /// The item with this id.
    case id(String)
    /// The item at this index of the referenced section.
    case path(SectionRef, Int)
}

/// A place for items, `[sectionRef, index]`: where `insertItems` inserts and where `moveItem` puts an item.
public struct ItemPosition: Hashable, Sendable {
    /// The section, by index or id.
    public var section: SectionRef
    /// The index within the section.
    public var index: Int

    /// The position `index` in `section`.
    public init(section: SectionRef, index: Int) {
        self.section = section
        self.index = index
    }
}

/// One operation of a mutation, as the op table of API.md defines it. Ops apply in order, each seeing the
/// result of the ones before it; all references of one op are resolved against the state before that op.
public enum Op: Hashable, Sendable {
    /// Inserts sections, with their items, starting at `at` (`at` = section count appends).
    case insertSections(at: Int, sections: [Section])
    /// Deletes sections and all their items.
    case deleteSections([SectionRef])
    /// Moves a section so that it ends at index `to`.
    case moveSection(SectionRef, to: Int)
    /// Replaces a section's data.
    case updateSection(SectionRef, data: JSONData)
    /// Inserts items starting at a position (index = item count appends).
    case insertItems(at: ItemPosition, items: [Item])
    /// Deletes items.
    case deleteItems([ItemRef])
    /// Moves an item so that it ends at `to`.
    case moveItem(ItemRef, to: ItemPosition)
    /// Replaces the data of existing items, named by id.
    case updateItems([Item])
}
