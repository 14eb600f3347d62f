import Model

/// `POST /v1/collections/{name}/mutations`.
extension App {
    func mutate(_ exchange: Exchange, _ name: String) throws(HTTPError) -> Response {
        let entry = try existing(name)
        let ops = try RequestDecoding.ops(exchange.body)
        return try commit(exchange, entry) { content throws(ModelError) in
            let changeset = try content.apply(ops)
            return (changeset, .applied(collection: name, version: changeset.to, ops: ops), .ok)
        }
    }
}
