import Model

/// The changeset rules that need no content (`docs/changesets.md`): no negative index, every array sorted by its
/// first index, and rule 1 (no section index nor index path twice among the before-batch coordinates, nor among
/// the after-batch ones). The rules that need the content (ids at their places, rule 3's sections, rule 5) are
/// checked where the changeset is applied (`LiveCollection`).
enum ChangesetShape {
    /// - Throws: `FeedError.invalidChangeset` naming the first broken rule.
    /// - Complexity: O(n log n) for n entries.
    static func check(_ changeset: Changeset) throws(FeedError) {
        let sections = changeset.sections
        let items = changeset.items
        let sectionIndices =
            sections.deleted.map(\.index) + sections.inserted.map(\.index)
            + sections.moved.flatMap { [$0.from, $0.to] }
            + sections.updated.map(\.index)
        let paths =
            items.deleted.map(\.at) + items.inserted.map(\.at) + items.moved.flatMap { [$0.from, $0.to] }
            + items.updated.map(\.at)
        if let negative = sectionIndices.first(where: { $0 < 0 }) {
            throw FeedError.invalidChangeset("section index \(negative) is negative")
        }
        if let negative = paths.first(where: { $0.section < 0 || $0.item < 0 }) {
            throw FeedError.invalidChangeset("index path \(negative) has a negative index")
        }
        try sorted(sections.deleted.map(\.index), "sections.deleted")
        try sorted(sections.inserted.map(\.index), "sections.inserted")
        try sorted(sections.moved.map(\.from), "sections.moved")
        try sorted(sections.updated.map(\.index), "sections.updated")
        try sorted(items.deleted.map(\.at), "items.deleted")
        try sorted(items.inserted.map(\.at), "items.inserted")
        try sorted(items.moved.map(\.from), "items.moved")
        try sorted(items.updated.map(\.at), "items.updated")
        try distinct(sections.deleted.map(\.index) + sections.moved.map(\.from), "section index before the batch")
        try distinct(sections.inserted.map(\.index) + sections.moved.map(\.to), "section index after the batch")
        try distinct(items.deleted.map(\.at) + items.moved.map(\.from), "index path before the batch")
        try distinct(items.inserted.map(\.at) + items.moved.map(\.to), "index path after the batch")
    }

    private static func sorted<T: Comparable>(_ values: [T], _ name: String) throws(FeedError) {
        for (left, right) in zip(values, values.dropFirst()) where !(left < right) {
            throw FeedError.invalidChangeset("\(name) is not sorted by its first index (rule of the eight arrays)")
        }
    }

    private static func distinct<T: Hashable>(_ values: [T], _ name: String) throws(FeedError) {
        var seen = Set<T>(minimumCapacity: values.count)
        for value in values where !seen.insert(value).inserted {
            throw FeedError.invalidChangeset("\(name) \(value) appears twice (rule 1)")
        }
    }
}
