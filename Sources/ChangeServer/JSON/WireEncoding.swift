import Model

/// Writes Model's values in the wire format of API.md.
extension JSONWriter {
    /// `{"from", "to", "sections": {...}, "items": {...}}`, all eight arrays present.
    mutating func changeset(_ changeset: Changeset) {
        raw("{")
        key("from")
        string(changeset.from.description)
        raw(",")
        key("to")
        string(changeset.to.description)
        raw(",")
        key("sections")
        sectionChanges(changeset.sections)
        raw(",")
        key("items")
        itemChanges(changeset.items)
        raw("}")
    }

    /// `{"collection", "version", "sections"}`.
    mutating func snapshot(collection: String, version: Version, sections: [Section]) {
        raw("{")
        key("collection")
        string(collection)
        raw(",")
        key("version")
        string(version.description)
        raw(",")
        key("sections")
        array(sections) { $0.section($1) }
        raw("}")
    }

    /// `{"collection", "version", "changes"}`: the answer to a mutation.
    mutating func mutationResult(collection: String, changeset: Changeset) {
        raw("{")
        key("collection")
        string(collection)
        raw(",")
        key("version")
        string(changeset.to.description)
        raw(",")
        key("changes")
        self.changeset(changeset)
        raw("}")
    }

    /// `{"collection", "from", "to", "changes"}`: the change feed's answer.
    mutating func feedChanges(collection: String, changeset: Changeset) {
        raw("{")
        key("collection")
        string(collection)
        raw(",")
        key("from")
        string(changeset.from.description)
        raw(",")
        key("to")
        string(changeset.to.description)
        raw(",")
        key("changes")
        self.changeset(changeset)
        raw("}")
    }

    mutating func section(_ section: Section) {
        raw("{")
        key("id")
        string(section.id)
        raw(",")
        key("data")
        raw(section.data.bytes)
        raw(",")
        key("items")
        array(section.items) { $0.item($1) }
        raw("}")
    }

    mutating func item(_ item: Item) {
        raw("{")
        key("id")
        string(item.id)
        raw(",")
        key("data")
        raw(item.data.bytes)
        raw("}")
    }

    mutating func indexPath(_ path: IndexPath) {
        raw("[")
        integer(path.section)
        raw(",")
        integer(path.item)
        raw("]")
    }

    private mutating func sectionChanges(_ changes: SectionChanges) {
        raw("{")
        key("deleted")
        array(changes.deleted) { writer, entry in
            writer.raw("{")
            writer.key("index")
            writer.integer(entry.index)
            writer.raw(",")
            writer.key("id")
            writer.string(entry.id)
            writer.raw("}")
        }
        raw(",")
        key("inserted")
        array(changes.inserted) { writer, entry in
            writer.raw("{")
            writer.key("index")
            writer.integer(entry.index)
            writer.raw(",")
            writer.key("id")
            writer.string(entry.section.id)
            writer.raw(",")
            writer.key("data")
            writer.raw(entry.section.data.bytes)
            writer.raw(",")
            writer.key("items")
            writer.array(entry.section.items) { $0.item($1) }
            writer.raw("}")
        }
        raw(",")
        key("moved")
        array(changes.moved) { writer, entry in
            writer.raw("{")
            writer.key("from")
            writer.integer(entry.from)
            writer.raw(",")
            writer.key("to")
            writer.integer(entry.to)
            writer.raw(",")
            writer.key("id")
            writer.string(entry.id)
            writer.raw("}")
        }
        raw(",")
        key("updated")
        array(changes.updated) { writer, entry in
            writer.raw("{")
            writer.key("index")
            writer.integer(entry.index)
            writer.raw(",")
            writer.key("id")
            writer.string(entry.id)
            writer.raw(",")
            writer.key("data")
            writer.raw(entry.data.bytes)
            writer.raw("}")
        }
        raw("}")
    }

    private mutating func itemChanges(_ changes: ItemChanges) {
        raw("{")
        key("deleted")
        array(changes.deleted) { writer, entry in
            writer.raw("{")
            writer.key("at")
            writer.indexPath(entry.at)
            writer.raw(",")
            writer.key("id")
            writer.string(entry.id)
            writer.raw("}")
        }
        raw(",")
        key("inserted")
        array(changes.inserted) { writer, entry in writer.placedItem(entry.at, entry.item) }
        raw(",")
        key("moved")
        array(changes.moved) { writer, entry in
            writer.raw("{")
            writer.key("from")
            writer.indexPath(entry.from)
            writer.raw(",")
            writer.key("to")
            writer.indexPath(entry.to)
            writer.raw(",")
            writer.key("id")
            writer.string(entry.id)
            writer.raw("}")
        }
        raw(",")
        key("updated")
        array(changes.updated) { writer, entry in writer.placedItem(entry.at, entry.item) }
        raw("}")
    }

    /// `{"at": [s, i], "id", "data"}`: an inserted or updated item.
    private mutating func placedItem(_ at: IndexPath, _ item: Item) {
        raw("{")
        key("at")
        indexPath(at)
        raw(",")
        key("id")
        string(item.id)
        raw(",")
        key("data")
        raw(item.data.bytes)
        raw("}")
    }
}
