import Model

/// Writes Model's values in the wire format of API.md.
extension JSONWriter {
    /// `{"from", "to", "sections": {...}, "items": {...}}`, all eight arrays present.
    mutating func changeset(_ changeset: Changeset) {
        object { writer in
            writer.field("from", version: changeset.from)
            writer.field("to", version: changeset.to)
            writer.field("sections") { $0.sectionChanges(changeset.sections) }
            writer.field("items") { $0.itemChanges(changeset.items) }
        }
    }

    /// `{"collection", "version", "sections"}`.
    mutating func snapshot(collection: String, version: Version, sections: [Section]) {
        object { writer in
            writer.field("collection", collection)
            writer.field("version", version: version)
            writer.field("sections") { $0.array(sections) { $0.section($1) } }
        }
    }

    /// `{"view", "version", "definition", "sections"}`.
    mutating func viewSnapshot(view: String, version: Version, definition: ViewDefinition, sections: [Section]) {
        object { writer in
            writer.field("view", view)
            writer.field("version", version: version)
            writer.field("definition", json: definition.canonicalJSON.bytes)
            writer.field("sections") { $0.array(sections) { $0.section($1) } }
        }
    }

    /// `{"collection"|"view", "version", "changes"}`: the answer to a mutation or a view definition.
    mutating func mutationResult(_ kind: FeedSubjectKind = .collection, name: String, changes: EncodedChangeset) {
        object { writer in
            writer.field(kind.key, name)
            writer.field("version", version: changes.changeset.to)
            writer.field("changes") { $0.raw(changes.json) }
        }
    }

    /// `{"collection"|"view", "from", "to", "next", "changes"}`: the change feed's answer.
    mutating func feedChanges(_ kind: FeedSubjectKind, name: String, changeset: Changeset, next: String) {
        object { writer in
            writer.field(kind.key, name)
            writer.field("from", version: changeset.from)
            writer.field("to", version: changeset.to)
            writer.field("next", next)
            writer.field("changes") { $0.changeset(changeset) }
        }
    }

    /// `{"collection"|"view", "reset": true, "to", "next", "snapshot"}`: the change feed's answer without `since`,
    /// around a snapshot encoded already.
    mutating func feedReset(_ kind: FeedSubjectKind, name: String, to version: Version, next: String, snapshot: [UInt8])
    {
        object { writer in
            writer.field(kind.key, name)
            writer.field("reset") { $0.raw("true") }
            writer.field("to", version: version)
            writer.field("next", next)
            writer.field("snapshot") { $0.raw(snapshot) }
        }
    }

    /// `{"collection"|"view", "from", "to", "next", "changes"}` around a changeset encoded already.
    mutating func feedChanges(_ kind: FeedSubjectKind, name: String, changes: EncodedChangeset, next: String) {
        object { writer in
            writer.field(kind.key, name)
            writer.field("from", version: changes.changeset.from)
            writer.field("to", version: changes.changeset.to)
            writer.field("next", next)
            writer.field("changes") { $0.raw(changes.json) }
        }
    }

    /// `"key":"epoch.seq"`, written without making the version's string first.
    mutating func field(_ key: StaticString, version: Version) {
        field(key) { writer in
            writer.byte(UInt8(ascii: "\""))
            var epoch = version.epoch
            epoch.withUTF8 { writer.escaped(utf8: $0) }
            writer.byte(UInt8(ascii: "."))
            writer.digits(UInt(truncatingIfNeeded: version.seq))
            writer.byte(UInt8(ascii: "\""))
        }
    }

    mutating func section(_ section: Section) {
        object { writer in
            writer.field("id", section.id)
            writer.field("data", json: section.data.bytes)
            writer.field("items") { $0.array(section.items) { $0.item($1) } }
        }
    }

    mutating func item(_ item: Item) {
        object { writer in
            writer.field("id", item.id)
            writer.field("data", json: item.data.bytes)
        }
    }

    /// `{"id", "data", "at"}`: an item with its index path.
    mutating func placedItem(_ item: Item, at path: ItemPath) {
        object { writer in
            writer.field("id", item.id)
            writer.field("data", json: item.data.bytes)
            writer.field("at") { $0.indexPath(path) }
        }
    }

    mutating func indexPath(_ path: ItemPath) {
        array([path.section, path.item]) { $0.integer($1) }
    }

    private mutating func sectionChanges(_ changes: SectionChanges) {
        object { writer in
            writer.field("deleted") {
                $0.array(changes.deleted) { writer, entry in
                    writer.object {
                        $0.field("index", entry.index)
                        $0.field("id", entry.id)
                    }
                }
            }
            writer.field("inserted") {
                $0.array(changes.inserted) { writer, entry in
                    writer.object { writer in
                        writer.field("index", entry.index)
                        writer.field("id", entry.section.id)
                        writer.field("data", json: entry.section.data.bytes)
                        writer.field("items") { $0.array(entry.section.items) { $0.item($1) } }
                    }
                }
            }
            writer.field("moved") {
                $0.array(changes.moved) { writer, entry in
                    writer.object {
                        $0.field("from", entry.from)
                        $0.field("to", entry.to)
                        $0.field("id", entry.id)
                    }
                }
            }
            writer.field("updated") {
                $0.array(changes.updated) { writer, entry in
                    writer.object { writer in
                        writer.field("index", entry.index)
                        writer.field("id", entry.id)
                        writer.field("data", json: entry.data.bytes)
                    }
                }
            }
        }
    }

    private mutating func itemChanges(_ changes: ItemChanges) {
        object { writer in
            writer.field("deleted") {
                $0.array(changes.deleted) { writer, entry in
                    writer.object { writer in
                        writer.field("at") { $0.indexPath(entry.at) }
                        writer.field("id", entry.id)
                    }
                }
            }
            writer.field("inserted") { $0.array(changes.inserted) { $0.itemAt($1.at, $1.item) } }
            writer.field("moved") {
                $0.array(changes.moved) { writer, entry in
                    writer.object { writer in
                        writer.field("from") { $0.indexPath(entry.from) }
                        writer.field("to") { $0.indexPath(entry.to) }
                        writer.field("id", entry.id)
                    }
                }
            }
            writer.field("updated") { $0.array(changes.updated) { $0.itemAt($1.at, $1.item) } }
        }
    }

    /// `{"at": [s, i], "id", "data"}`: an inserted or updated item in a changeset.
    private mutating func itemAt(_ at: ItemPath, _ item: Item) {
        object { writer in
            writer.field("at") { $0.indexPath(at) }
            writer.field("id", item.id)
            writer.field("data", json: item.data.bytes)
        }
    }
}
