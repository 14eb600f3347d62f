import Model

/// `POST /v1/collections/{name}/mutations`.
extension App {
    func mutate(_ exchange: Exchange, _ name: String, _ worker: Worker) throws(HTTPError) -> HandlerResult {
        _ = try existing(name)
        let ops = try RequestDecoding.ops(exchange.body)
        return submit(
            exchange, worker, .ops(collection: name, ops: ops, conditions: Preconditions.conditions(exchange)))
    }
}
