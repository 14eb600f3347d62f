import Model

/// `GET /v1/collections`, and `GET`, `PUT`, `DELETE /v1/collections/{name}`.
extension App {
    /// A page of collections sorted by name (`listPage`): those after the cursor `after` (a name), at most
    /// `limit`; `next` is the cursor of the following page, present while more remain.
    func listCollections(_ request: Request) throws(HTTPError) -> Response {
        let (after, limit) = try Self.listPage(request, of: .collection)
        let page = registry.page(after: after, limit: limit)
        let rows = page.entries.map { entry in
            entry.content.withLock { (entry.name, $0.version, $0.sectionCount, $0.itemCount) }
        }
        let next = page.hasMore ? rows.last?.0 : nil
        return .json(.ok) { writer in
            writer.object { writer in
                writer.field("collections") {
                    $0.array(rows) { writer, row in
                        writer.object { writer in
                            writer.field("name", row.0)
                            writer.field("version", row.1.description)
                            writer.field("sections", row.2)
                            writer.field("items", row.3)
                        }
                    }
                }
                if let next { writer.field("next", next) }
            }
        }
    }

    func snapshot(_ request: Request, _ name: String, _ connection: () -> Connection) throws(HTTPError)
        -> RouteResult
    {
        let collection = try existing(name)
        if let answer = collection.readWithoutEncoding(request) { return .respond(answer) }
        return answerRead(of: collection, connection()) { [responseBudget] in
            collection.read(request, budget: responseBudget)
        }
    }

    /// Creates the collection (`201`) or replaces its whole content (`200`), diffing old against new.
    func replace(_ request: Request, _ name: String, _ connection: Connection) throws(HTTPError) -> RouteResult {
        let conditions = try Self.conditions(request)
        // Checked when the request arrives: creations in flight together may pass the limit by their number.
        if registry.entry(name) == nil, registry.count >= config.maxCollections {
            throw .tooManyCollections(limit: config.maxCollections)
        }
        var generator = SystemRandomNumberGenerator()
        let epoch = Version.randomEpoch(using: &generator)
        return try submit(request, name, connection) { request throws(HTTPError) in
            .put(
                collection: name, epoch: epoch, sections: try RequestDecoding.sections(request.body),
                conditions: conditions)
        }
    }

    func deleteCollection(_ request: Request, _ name: String, _ connection: Connection) throws(HTTPError)
        -> RouteResult
    {
        let conditions = try Self.conditions(request)
        try expectWritable(name)
        return try submit(request, name, connection) { _ in .delete(collection: name, conditions: conditions) }
    }

    /// The collection called `name`, or `404 collection_not_found`.
    func existing(_ name: String) throws(HTTPError) -> CollectionEntry {
        guard let entry = registry.entry(name) else { throw .collectionNotFound(name) }
        return entry
    }

    /// Refuses a write to a collection that is not there (`404 collection_not_found`) before anything is written,
    /// but with a shared database: there the collection may have been created through another server a moment ago
    /// and not be applied here yet (a client behind a load balancer that creates a list and then adds to it through
    /// another server got `404` most times, and its `DELETE`, answered `404`, left the collection in place). The
    /// record is journaled all the same, and applying it in the database's order tells whether the collection is
    /// there; a record that finds none is answered `404` then, and its rows are purged
    /// (`Journal.noteMissingCollection`).
    func expectWritable(_ name: String) throws(HTTPError) {
        guard !committer.isShared else { return }
        _ = try existing(name)
    }
}
