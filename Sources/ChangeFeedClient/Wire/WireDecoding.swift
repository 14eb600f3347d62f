import Model

/// A `200` answer of the change feed, decoded.
enum FeedAnswer: Hashable, Sendable {
    /// A reset (the poll had no `since`): the snapshot.
    case reset(Snapshot, next: String?)
    /// A changeset (empty when the poll timed out with nothing new).
    case changes(Changeset, next: String?)
}

/// Decodes the wire format (`openapi.yaml`, `docs/changesets.md`) into Model's values.
enum WireDecoding {
    /// Parses the body of a `200` feed answer.
    /// - Throws: `FeedError.invalidAnswer` for anything that is not such an answer, and
    ///   `FeedError.invalidChangeset` for a changeset that breaks a rule `ChangesetShape` checks.
    /// - Complexity: O(n log n) for n bytes.
    static func feedAnswer(_ bytes: [UInt8], kind: FeedClient.Kind) throws(FeedError) -> FeedAnswer {
        let root = try WireReader(try parse(bytes), path: "answer")
        let next = try root.optionalString("next")
        if root.has("reset") {
            guard case .bool(true) = try root.value("reset") else {
                throw FeedError.invalidAnswer("answer.reset is not true")
            }
            let snapshot = try self.snapshot(try root.object("snapshot"), kind: kind)
            guard snapshot.version == (try root.version("to")) else {
                throw FeedError.invalidAnswer("answer.to is not the snapshot's version")
            }
            return .reset(snapshot, next: next)
        }
        let from = try root.version("from")
        let to = try root.version("to")
        let changeset = try self.changeset(try root.object("changes"), from: from, to: to)
        try ChangesetShape.check(changeset)
        return .changes(changeset, next: next)
    }

    /// An error answer as `ServerError`: the contract's body, or a `nil` code (and the body's start as the
    /// message, when it has no `error` object) for any other body.
    static func serverError(_ answer: HTTPAnswer) -> ServerError {
        let bytes = Array(answer.body)
        guard let root = try? WireReader(try parse(bytes), path: "answer"), let error = try? root.object("error")
        else {
            return ServerError(
                status: answer.status, code: nil, message: String(decoding: bytes.prefix(200), as: UTF8.self),
                retryAfter: answer.retryAfter)
        }
        let op = (try? error.value("op")).flatMap { try? WireReader.index($0, path: "answer.error.op") }
        return ServerError(
            status: answer.status, code: (try? error.string("code")).map(ErrorCode.init(rawValue:)),
            message: (try? error.string("message")) ?? "", op: op, retryAfter: answer.retryAfter,
            current: try? root.version("current"))
    }

    /// The answer to a committed write, `{"collection" or "view", "version", "changes"}`.
    static func writeResult(_ bytes: [UInt8], created: Bool) throws(FeedError) -> WriteResult {
        let root = try WireReader(try parse(bytes), path: "answer")
        let version = try root.version("version")
        let changes = try root.object("changes")
        let changeset = try self.changeset(changes, from: try changes.version("from"), to: try changes.version("to"))
        guard changeset.to == version else { throw FeedError.invalidAnswer("answer.changes.to is not answer.version") }
        try ChangesetShape.check(changeset)
        return WriteResult(version: version, changes: changeset, created: created)
    }

    /// A snapshot answer, `{"collection" or "view", "version", "sections"}`.
    static func snapshot(_ bytes: [UInt8], kind: FeedClient.Kind) throws(FeedError) -> Snapshot {
        try snapshot(try WireReader(try parse(bytes), path: "answer"), kind: kind)
    }

    /// An item answer, `{"id", "data", "at"}`.
    static func placedItem(_ bytes: [UInt8]) throws(FeedError) -> (item: Item, at: ItemPath) {
        let root = try WireReader(try parse(bytes), path: "answer")
        return (try item(root), try root.itemPath("at"))
    }

    static func parse(_ bytes: [UInt8]) throws(FeedError) -> JSON {
        do {
            return try JSON(parsing: bytes)
        } catch {
            throw FeedError.invalidAnswer("not JSON at byte \(error.offset): \(error.reason)")
        }
    }

    static func snapshot(_ reader: WireReader, kind: FeedClient.Kind) throws(FeedError) -> Snapshot {
        let sections = try reader.array("sections").enumerated().map { (offset, value) throws(FeedError) in
            try section(try WireReader(value, path: "\(reader.path).sections[\(offset)]"))
        }
        return Snapshot(
            name: try reader.string(kind.bodyKey), version: try reader.version("version"), sections: sections)
    }

    static func section(_ reader: WireReader) throws(FeedError) -> Section {
        let items = try reader.array("items").enumerated().map { (offset, value) throws(FeedError) in
            try item(try WireReader(value, path: "\(reader.path).items[\(offset)]"))
        }
        return Section(id: try reader.id(), data: reader.data(), items: items)
    }

    static func item(_ reader: WireReader) throws(FeedError) -> Item {
        Item(id: try reader.id(), data: reader.data())
    }

    /// A changeset object; its own `from`/`to`, where present, must be the answer's.
    static func changeset(_ reader: WireReader, from: Version, to: Version) throws(FeedError) -> Changeset {
        if reader.has("from"), try reader.version("from") != from {
            throw FeedError.invalidAnswer("answer.changes.from is not answer.from")
        }
        if reader.has("to"), try reader.version("to") != to {
            throw FeedError.invalidAnswer("answer.changes.to is not answer.to")
        }
        let sections = try reader.object("sections")
        let items = try reader.object("items")
        func each<T>(_ group: WireReader, _ key: String, _ read: (WireReader) throws(FeedError) -> T)
            throws(FeedError) -> [T]
        {
            try group.array(key).enumerated().map { (offset, value) throws(FeedError) in
                try read(try WireReader(value, path: "\(group.path).\(key)[\(offset)]"))
            }
        }
        return Changeset(
            from: from, to: to,
            sections: SectionChanges(
                deleted: try each(sections, "deleted") { entry throws(FeedError) in
                    SectionDeletion(index: try entry.index("index"), id: try entry.id())
                },
                inserted: try each(sections, "inserted") { entry throws(FeedError) in
                    SectionInsertion(index: try entry.index("index"), section: try section(entry))
                },
                moved: try each(sections, "moved") { entry throws(FeedError) in
                    SectionMove(from: try entry.index("from"), to: try entry.index("to"), id: try entry.id())
                },
                updated: try each(sections, "updated") { entry throws(FeedError) in
                    SectionUpdate(index: try entry.index("index"), id: try entry.id(), data: entry.data())
                }),
            items: ItemChanges(
                deleted: try each(items, "deleted") { entry throws(FeedError) in
                    ItemDeletion(at: try entry.itemPath("at"), id: try entry.id())
                },
                inserted: try each(items, "inserted") { entry throws(FeedError) in
                    ItemInsertion(at: try entry.itemPath("at"), item: try item(entry))
                },
                moved: try each(items, "moved") { entry throws(FeedError) in
                    ItemMove(from: try entry.itemPath("from"), to: try entry.itemPath("to"), id: try entry.id())
                },
                updated: try each(items, "updated") { entry throws(FeedError) in
                    ItemUpdate(at: try entry.itemPath("at"), item: try item(entry))
                }))
    }
}
