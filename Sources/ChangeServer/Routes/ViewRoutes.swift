import Model

/// `GET /v1/views`, and `GET`, `PUT`, `DELETE /v1/views/{name}`: live views of a source collection.
extension App {
    /// A page of views sorted by name, as `listCollections` pages collections.
    func listViews(_ request: Request) throws(HTTPError) -> Response {
        let (after, limit) = try Self.listPage(request, of: .view)
        let page = views.page(after: after, limit: limit)
        let rows = page.entries.map { entry in
            entry.live.withLock { (entry.name, $0.definition.source, $0.version, $0.collection) }
        }
        let next = page.hasMore ? rows.last?.0 : nil
        return .json(.ok) { writer in
            writer.object { writer in
                writer.field("views") {
                    $0.array(rows) { writer, row in
                        writer.object { writer in
                            writer.field("name", row.0)
                            writer.field("source", row.1)
                            writer.field("version", row.2.description)
                            writer.field("sections", row.3.sectionCount)
                            writer.field("items", row.3.itemCount)
                        }
                    }
                }
                if let next { writer.field("next", next) }
            }
        }
    }

    func viewSnapshot(_ request: Request, _ name: String, _ connection: () -> Connection) throws(HTTPError)
        -> RouteResult
    {
        let view = try existingView(name)
        if let answer = view.readWithoutEncoding(request) { return .respond(answer) }
        return answerRead(of: view, connection()) { [responseBudget] in view.read(request, budget: responseBudget) }
    }

    /// `GET /v1/views/{name}/items/{id}`: an item the view shows, and where (`{"id", "data", "at": [s, i]}`, as a
    /// collection's item): in a view sorted by score, its rank, without reading the whole view.
    func viewItem(_ name: String, _ id: String) throws(HTTPError) -> Response {
        let view = try existingView(name)
        guard let (item, at) = view.live.withLock({ $0.item(id: id) }) else { throw .itemNotInView(id, name) }
        return .json(.ok) { $0.placedItem(item, at: at) }
    }

    /// Defines the view (`201`) or replaces its definition (`200`, keeping its epoch; the changeset diffs the old
    /// content against the new). The definition is validated before it is journaled, so that a journaled one never
    /// fails (off the event loop for a large body, as every decoding); `If-Match` and `If-None-Match` are checked
    /// against the view's version when the record is applied.
    func defineView(_ request: Request, _ name: String, _ connection: Connection) throws(HTTPError) -> RouteResult {
        let conditions = try Self.conditions(request)
        // Checked when the request arrives, as `--max-collections` is.
        if views.entry(name) == nil, views.count >= config.maxViews { throw .tooManyViews(limit: config.maxViews) }
        // Drawn here, as a collection's is: ThreadSanitizer's build crashed on a generator made inside the closure
        // (the compiler gives a zero-sized value no real address, and the instrumentation touches it).
        var generator = SystemRandomNumberGenerator()
        let epoch = Version.randomEpoch(using: &generator)
        return try submit(request, LaneRouter.lane(ofView: name), connection) { request throws(HTTPError) in
            let canonical = try RequestDecoding.canonicalBody(request.body)
            let definition: ViewDefinition
            do throws(ViewDefinitionError) {
                definition = try ViewDefinition(json: canonical)
                try definition.checkNewDefinition()
            } catch {
                throw .invalidView(error)
            }
            return .defineView(
                view: name, epoch: epoch, definition: definition.canonicalJSON, conditions: conditions)
        }
    }

    func deleteView(_ request: Request, _ name: String, _ connection: Connection) throws(HTTPError) -> RouteResult {
        let conditions = try Self.conditions(request)
        _ = try existingView(name)
        return try submit(request, LaneRouter.lane(ofView: name), connection) { _ in
            .deleteView(view: name, conditions: conditions)
        } answer: { result in
            if case .rejected(.viewNotFound) = result { return .error(.viewNotFound(name)) }
            return App.mutationResponse(result)
        }
    }

    /// The view called `name`, or `404 view_not_found`.
    func existingView(_ name: String) throws(HTTPError) -> ViewEntry {
        guard let entry = views.entry(name) else { throw .viewNotFound(name) }
        return entry
    }
}
