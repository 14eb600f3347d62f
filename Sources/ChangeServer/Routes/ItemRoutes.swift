import Model

/// `GET`, `PUT` (upsert) and `DELETE /v1/collections/{name}/items/{id}`.
extension App {
    func item(_ exchange: Exchange, _ name: String, _ id: String) throws(HTTPError) -> Response {
        let entry = try existing(name)
        guard let (item, at) = entry.content.withLock({ $0.item(id: id) }) else { throw itemNotFound(id, name) }
        return .json(.ok) { writer in
            writer.raw("{")
            writer.key("id")
            writer.string(item.id)
            writer.raw(",")
            writer.key("data")
            writer.raw(item.data.bytes)
            writer.raw(",")
            writer.key("at")
            writer.indexPath(at)
            writer.raw("}")
        }
    }

    func upsertItem(_ exchange: Exchange, _ name: String, _ id: String) throws(HTTPError) -> Response {
        let entry = try existing(name)
        let upsert = try RequestDecoding.upsert(exchange.body)
        return try commit(exchange, entry) { content throws(ModelError) in
            let result = try content.upsert(id: id, data: upsert.data, section: upsert.section, index: upsert.index)
            let record = JournalRecord.applied(collection: name, version: result.changeset.to, ops: result.ops)
            return (result.changeset, record, result.created ? .created : .ok)
        }
    }

    func deleteItem(_ exchange: Exchange, _ name: String, _ id: String) throws(HTTPError) -> Response {
        let entry = try existing(name)
        do throws(HTTPError) {
            return try commit(exchange, entry) { content throws(ModelError) in
                let ops = [Op.deleteItems([.id(id)])]
                let changeset = try content.apply(ops)
                return (changeset, .applied(collection: name, version: changeset.to, ops: ops), .ok)
            }
        } catch  where error.code == ModelError.Code.itemNotFound.rawValue {
            throw itemNotFound(id, name)
        }
    }

    private func itemNotFound(_ id: String, _ name: String) -> HTTPError {
        HTTPError(.notFound, code: "item_not_found", "There is no item '\(id)' in the collection '\(name)'.")
    }
}
