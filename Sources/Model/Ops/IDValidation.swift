extension ModelError {
    /// Throws `invalid_id` unless `id` is non-empty, at most `maximumIDByteCount` UTF-8 bytes, and free of NUL
    /// (which a URL can carry as `%00` but a JSON body never can, so such an item could not be named again).
    /// - Complexity: O(n) in the id's bytes, at most `maximumIDByteCount`.
    static func check(id: String, what: String) throws(ModelError) {
        let count = id.utf8.count
        guard count > 0, count <= maximumIDByteCount else {
            throw ModelError(.invalidID, "\(what) id must be 1 to \(maximumIDByteCount) UTF-8 bytes, got \(count)")
        }
        guard !id.utf8.contains(0) else {
            throw ModelError(.invalidID, "\(what) id must not contain the NUL character")
        }
    }
}

extension Store {
    /// Checks a whole new content: valid ids, section ids unique, item ids unique across all sections.
    /// - Complexity: O(n) expected, with the same fast id table as the diff.
    static func checkContent(_ sections: [Section]) throws(ModelError) {
        let sectionIDs = sections.map(\.id)
        var sectionTable = IDTable(capacity: sectionIDs.count)
        for position in sectionIDs.indices {
            try ModelError.check(id: sectionIDs[position], what: "section")
            guard sectionTable.insert(position, of: sectionIDs) == nil else {
                throw ModelError(.duplicateID, "section id \(sectionIDs[position].quotedAsJSON) appears twice")
            }
        }
        var itemIDs: [String] = []
        itemIDs.reserveCapacity(sections.reduce(0) { $0 + $1.items.count })
        for section in sections { itemIDs.append(contentsOf: section.items.lazy.map(\.id)) }
        var itemTable = IDTable(capacity: itemIDs.count)
        for position in itemIDs.indices {
            try ModelError.check(id: itemIDs[position], what: "item")
            guard itemTable.insert(position, of: itemIDs) == nil else {
                throw ModelError(.duplicateID, "item id \(itemIDs[position].quotedAsJSON) appears twice")
            }
        }
    }
}
