import Model

/// `POST /v1/collections/{name}/mutations`.
extension App {
    func mutate(_ request: Request, _ name: String, _ connection: Connection) throws(HTTPError) -> RouteResult {
        let conditions = try Self.conditions(request)
        try expectWritable(name)
        return try submit(request, name, connection) { request throws(HTTPError) in
            .ops(collection: name, ops: try RequestDecoding.ops(request.body), conditions: conditions)
        }
    }
}
