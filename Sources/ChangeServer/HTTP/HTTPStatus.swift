/// The HTTP statuses the server answers with.
enum HTTPStatus: Int, Sendable {
    case ok = 200
    case created = 201
    case noContent = 204
    case notModified = 304
    case badRequest = 400
    case unauthorized = 401
    case notFound = 404
    case methodNotAllowed = 405
    case requestTimeout = 408
    case conflict = 409
    case gone = 410
    case preconditionFailed = 412
    case payloadTooLarge = 413
    case unsupportedMediaType = 415
    case tooManyRequests = 429
    case requestHeaderFieldsTooLarge = 431
    /// nginx's code for a connection closed without an answer by the server's choice: logged, never received.
    case closedWithoutAnswer = 444
    /// nginx's code for a request whose client closed the connection before the answer: logged, never received.
    case clientClosedRequest = 499
    case internalServerError = 500
    case notImplemented = 501
    case serviceUnavailable = 503
}
