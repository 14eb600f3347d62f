import Model

/// `GET`, `PUT` (upsert) and `DELETE /v1/collections/{name}/items/{id}`.
extension App {
    func item(_ exchange: Exchange, _ name: String, _ id: String) throws(HTTPError) -> Response {
        let entry = try existing(name)
        guard let (item, at) = entry.content.withLock({ $0.item(id: id) }) else { throw App.itemNotFound(id, name) }
        return .json(.ok) { $0.placedItem(item, at: at) }
    }

    func upsertItem(_ exchange: Exchange, _ name: String, _ id: String, _ worker: Worker) throws(HTTPError)
        -> HandlerResult
    {
        _ = try existing(name)
        let upsert = try RequestDecoding.upsert(exchange.body)
        let record = JournalRecord.upsert(
            collection: name, id: id, data: upsert.data, section: upsert.section, index: upsert.index,
            conditions: Preconditions.conditions(exchange))
        return submit(exchange, worker, record)
    }

    func deleteItem(_ exchange: Exchange, _ name: String, _ id: String, _ worker: Worker) throws(HTTPError)
        -> HandlerResult
    {
        let entry = try existing(name)
        guard entry.content.withLock({ $0.item(id: id) }) != nil else { throw App.itemNotFound(id, name) }
        let record = JournalRecord.ops(
            collection: name, ops: [.deleteItems([.id(id)])], conditions: Preconditions.conditions(exchange))
        return submit(exchange, worker, record) { outcome in
            if case .rejected(let error) = outcome, error.code == ModelError.Code.itemNotFound.rawValue {
                return .error(App.itemNotFound(id, name))
            }
            return App.mutationResponse(outcome)
        }
    }

    static func itemNotFound(_ id: String, _ name: String) -> HTTPError {
        HTTPError(.notFound, code: "item_not_found", "There is no item '\(id)' in the collection '\(name)'.")
    }
}
