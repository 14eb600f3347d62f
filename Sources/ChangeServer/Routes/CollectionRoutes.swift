import Model

/// `GET /v1/collections`, and `GET`, `PUT`, `DELETE /v1/collections/{name}`.
extension App {
    func listCollections() -> Response {
        let rows = registry.all().map { entry in
            entry.content.withLock { (entry.name, $0.version, $0.sectionCount, $0.itemCount) }
        }
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
            }
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
    func replace(_ exchange: Exchange, _ name: String, _ worker: Worker) throws(HTTPError) -> HandlerResult {
        let sections = try RequestDecoding.sections(exchange.body)
        var generator = SystemRandomNumberGenerator()
        let epoch = Version.randomEpoch(using: &generator)
        let conditions = Preconditions.conditions(exchange)
        return submit(
            exchange, worker, .put(collection: name, epoch: epoch, sections: sections, conditions: conditions))
    }

    func deleteCollection(_ exchange: Exchange, _ name: String, _ worker: Worker) throws(HTTPError) -> HandlerResult {
        _ = try existing(name)
        return submit(exchange, worker, .delete(collection: name, conditions: Preconditions.conditions(exchange)))
    }

    /// The collection called `name`, or `404 collection_not_found`.
    func existing(_ name: String) throws(HTTPError) -> CollectionEntry {
        guard let entry = registry.entry(name) else {
            throw HTTPError(.notFound, code: "collection_not_found", "There is no collection '\(name)'.")
        }
        return entry
    }
}
