import Model

extension HTTPError {
    /// A rejected mutation: `400` for an invalid id, `409` for every conflict with the collection's content.
    init(_ error: ModelError) {
        let status: HTTPStatus = error.code == .invalidID ? .badRequest : .conflict
        self.init(status, code: error.code.rawValue, error.message, opIndex: error.opIndex)
    }
}

/// Runs a Model call, turning its typed error into the HTTP error.
func mapModelError<Result>(_ body: () throws(ModelError) -> Result) throws(HTTPError) -> Result {
    do throws(ModelError) {
        return try body()
    } catch {
        throw HTTPError(error)
    }
}
