import Model

/// `GET`, `PUT` (upsert) and `DELETE /v1/collections/{name}/items/{id}`.
extension App {
    func item(_ name: String, _ id: String) throws(HTTPError) -> Response {
        let entry = try existing(name)
        guard let (item, at) = entry.content.withLock({ $0.item(id: id) }) else { throw .itemNotFound(id, in: name) }
        return .json(.ok) { $0.placedItem(item, at: at) }
    }

    func upsertItem(_ request: Request, _ name: String, _ id: String, _ connection: Connection) throws(HTTPError)
        -> RouteResult
    {
        let conditions = try Self.conditions(request)
        try expectWritable(name)
        return try submit(request, name, connection) { request throws(HTTPError) in
            let upsert = try RequestDecoding.upsert(request.body)
            return .upsert(
                collection: name, id: id, data: upsert.data, section: upsert.section, index: upsert.index,
                conditions: conditions)
        }
    }

    func deleteItem(_ request: Request, _ name: String, _ id: String, _ connection: Connection) throws(HTTPError)
        -> RouteResult
    {
        let conditions = try Self.conditions(request)
        // With a shared database the item (and its collection) may have been written through another server and
        // not be applied here yet: the record is journaled all the same, and applying it in order tells whether
        // the item is there (`expectWritable`).
        if !committer.isShared, try existing(name).content.withLock({ $0.item(id: id) }) == nil {
            throw .itemNotFound(id, in: name)
        }
        return try submit(request, name, connection) { _ in
            .ops(collection: name, ops: [.deleteItems([.id(id)])], conditions: conditions)
        } answer: { result in
            // The item went away between the check above and the commit: still the 404 of a missing item.
            if case .rejected(.model(let error)) = result, error.code == .itemNotFound {
                return .error(.itemNotFound(id, in: name))
            }
            return App.mutationResponse(result)
        }
    }
}
