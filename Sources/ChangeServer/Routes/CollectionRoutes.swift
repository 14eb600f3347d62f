import Model

/// `GET /v1/collections`, and `GET`, `PUT`, `DELETE /v1/collections/{name}`.
extension App {
    func listCollections() -> Response {
        let rows = registry.all().map { entry in
            entry.content.withLock { (entry.name, $0.version, $0.sectionCount, $0.itemCount) }
        }
        return .json(.ok) { writer in
            writer.raw("{")
            writer.key("collections")
            writer.array(rows) { writer, row in
                writer.raw("{")
                writer.key("name")
                writer.string(row.0)
                writer.raw(",")
                writer.key("version")
                writer.string(row.1.description)
                writer.raw(",")
                writer.key("sections")
                writer.integer(row.2)
                writer.raw(",")
                writer.key("items")
                writer.integer(row.3)
                writer.raw("}")
            }
            writer.raw("}")
        }
    }

    func snapshot(_ exchange: Exchange, _ name: String) throws(HTTPError) -> Response {
        let entry = try existing(name)
        let version = entry.content.withLock { $0.version }
        let etag = Preconditions.etag(version)
        if let ifNoneMatch = exchange.header("If-None-Match"), Preconditions.matches(ifNoneMatch, version) {
            return Response(.notModified, headers: [("ETag", etag)])
        }
        let (current, sections) = entry.content.withLock { ($0.version, $0.snapshot()) }
        return .json(.ok, headers: [("ETag", Preconditions.etag(current))]) {
            $0.snapshot(collection: name, version: current, sections: sections)
        }
    }

    /// Creates the collection (`201`) or replaces its whole content (`200`), diffing old against new.
    func replace(_ exchange: Exchange, _ name: String) throws(HTTPError) -> Response {
        let sections = try RequestDecoding.sections(exchange.body)
        if let entry = registry.entry(name) {
            return try commit(exchange, entry) { content throws(ModelError) in
                let changeset = try content.replace(with: sections)
                return (changeset, .replaced(collection: name, version: changeset.to, sections: sections), .ok)
            }
        }
        try Preconditions.check(exchange, nil)
        let epoch = Version.randomEpoch(using: &random)
        let content = try mapModelError { () throws(ModelError) in
            try VersionedCollection(epoch: epoch, sections: sections, limits: historyLimits)
        }
        let created = Version(epoch: epoch, seq: 1)
        let changeset = content.changes(since: Version(epoch: epoch, seq: 0)) ?? Changeset(from: created, to: created)
        let entry = CollectionEntry(name: name, content: content)
        try journal.append(.created(collection: name, epoch: epoch, sections: sections))
        guard registry.insert(entry) === entry else {
            throw HTTPError(.conflict, code: "conflict", "The collection '\(name)' was created meanwhile; retry.")
        }
        metrics.mutationCommitted()
        return .json(.created, headers: [("ETag", Preconditions.etag(created))]) {
            $0.mutationResult(collection: name, changeset: changeset)
        }
    }

    func deleteCollection(_ exchange: Exchange, _ name: String) throws(HTTPError) -> Response {
        let entry = try existing(name)
        try entry.content.withLock { content throws(HTTPError) in
            try Preconditions.check(exchange, content.version)
            try journal.append(.deleted(collection: name))
        }
        if registry.remove(entry) {
            metrics.mutationCommitted()
            feed.deleted(entry)
        }
        return Response(.noContent)
    }

    var historyLimits: HistoryLimits { HistoryLimits(versions: config.history) }

    /// The collection called `name`, or `404 collection_not_found`.
    func existing(_ name: String) throws(HTTPError) -> CollectionEntry {
        guard let entry = registry.entry(name) else {
            throw HTTPError(.notFound, code: "collection_not_found", "There is no collection '\(name)'.")
        }
        return entry
    }

    /// Runs a mutation on `entry` under its lock: checks `If-Match`, applies, journals what changed, wakes the
    /// collection's held polls, and answers with the new version and the changeset.
    func commit(
        _ exchange: Exchange, _ entry: CollectionEntry,
        _ mutation: (inout VersionedCollection) throws(ModelError) -> (Changeset, JournalRecord, HTTPStatus)
    ) throws(HTTPError) -> Response {
        let (changeset, status) = try entry.content.withLock { content throws(HTTPError) in
            try Preconditions.check(exchange, content.version)
            let (changeset, record, status) = try mapModelError { () throws(ModelError) in try mutation(&content) }
            if !changeset.isEmpty { try journal.append(record) }
            return (changeset, status)
        }
        if !changeset.isEmpty {
            metrics.mutationCommitted()
            feed.committed(entry)
        }
        return .json(status, headers: [("ETag", Preconditions.etag(changeset.to))]) {
            $0.mutationResult(collection: entry.name, changeset: changeset)
        }
    }
}
