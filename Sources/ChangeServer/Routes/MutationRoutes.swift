import Model

/// `POST /v1/collections/{name}/mutations`.
extension App {
    func mutate(_ request: Request, _ name: String, _ connection: Connection) throws(HTTPError) -> RouteResult {
        let conditions = try Self.conditions(request)
        _ = try existing(name)
        return try submit(request, name, connection) { request throws(HTTPError) in
            .ops(collection: name, ops: try RequestDecoding.ops(request.body), conditions: conditions)
        }
    }
}
