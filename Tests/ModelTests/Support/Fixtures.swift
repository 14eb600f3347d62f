@testable import Model

/// Compact builders for hand-written cases: `sections("A: H J K", "B: X Y Z")`.
func sections(_ lines: String...) -> [Section] {
    lines.map { line in
        let parts = line.split(separator: ":", maxSplits: 1)
        let items = parts.count > 1 ? parts[1].split(separator: " ").map { Item(id: String($0)) } : []
        return Section(id: String(parts[0]), items: items)
    }
}

func path(_ section: Int, _ item: Int) -> ItemPath { ItemPath(section: section, item: item) }

func json(_ text: String) -> JSONData { JSONData(canonical: text) }

/// The changeset of replacing `old` by `new`, checked against the UIKit model and the move bound.
func replacing(_ old: [Section], with new: [Section]) throws -> Changeset {
    var collection = try VersionedCollection(epoch: "e", sections: old)
    let changeset = try collection.replace(with: new)
    verify(changeset, from: old, to: new, "replace")
    return changeset
}
