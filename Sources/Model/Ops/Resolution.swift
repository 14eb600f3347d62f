/// Turning the references of a request into positions in the current state, or typed errors.
extension Store {
    /// - Complexity: O(1) for an index, a lookup by id otherwise.
    func resolve(_ ref: SectionRef) throws(ModelError) -> Int {
        switch ref {
        case .index(let index):
            guard index >= 0, index < sectionCount else {
                throw ModelError(.indexOutOfRange, "section index \(index) is outside 0..<\(sectionCount)")
            }
            return index
        case .id(let id):
            try ModelError.check(id: id, what: "section")
            guard let index = sectionIndex(of: id) else {
                throw ModelError(.sectionNotFound, "no section with id \(id.quotedAsJSON)")
            }
            return index
        }
    }

    /// - Complexity: a lookup by id, or a section resolution.
    func resolve(_ ref: ItemRef) throws(ModelError) -> ItemPath {
        switch ref {
        case .id(let id):
            try ModelError.check(id: id, what: "item")
            guard let path = location(ofItem: id) else {
                throw ModelError(.itemNotFound, "no item with id \(id.quotedAsJSON)")
            }
            return path
        case .path(let sectionRef, let index):
            let section = try resolve(sectionRef)
            let count = itemCount(inSection: section)
            guard index >= 0, index < count else {
                throw ModelError(.indexOutOfRange, "item index \(index) is outside 0..<\(count) in section \(section)")
            }
            return ItemPath(section: section, item: index)
        }
    }

    /// Checks that `index` lies in `0...upperBound` (`closed`) or `0..<upperBound`.
    static func check(index: Int, upTo upperBound: Int, closed: Bool, what: String) throws(ModelError) {
        let ok = index >= 0 && (closed ? index <= upperBound : index < upperBound)
        guard ok else {
            throw ModelError(.indexOutOfRange, "\(what) \(index) is outside 0\(closed ? "..." : "..<")\(upperBound)")
        }
    }

    /// Checks new item ids: valid, not in the store, not repeated.
    /// - Complexity: O(k) lookups for k ids.
    func checkNew(itemIDs ids: some Sequence<String>) throws(ModelError) {
        // The set of ids seen is made from the second id on: one new item (an upsert) costs one lookup.
        var first: String?
        var seen = Set<ExactString>()
        for id in ids {
            try ModelError.check(id: id, what: "item")
            var isRepeated = false
            if let first {
                if seen.isEmpty { seen.insert(ExactString(first)) }
                isRepeated = !seen.insert(ExactString(id)).inserted
            } else {
                first = id
            }
            guard !isRepeated, location(ofItem: id) == nil else {
                throw ModelError(.duplicateID, "item id \(id.quotedAsJSON) already exists")
            }
        }
    }

    /// Checks new sections: valid unique section ids not in the store, and valid unique new item ids.
    func checkNew(sections: [Section]) throws(ModelError) {
        var seen = Set<ExactString>()
        for section in sections {
            try ModelError.check(id: section.id, what: "section")
            guard sectionIndex(of: section.id) == nil, seen.insert(ExactString(section.id)).inserted else {
                throw ModelError(.duplicateID, "section id \(section.id.quotedAsJSON) already exists")
            }
        }
        try checkNew(itemIDs: sections.lazy.flatMap { $0.items.lazy.map(\.id) })
    }
}
