import Model

/// An error a handler throws to answer with a 4xx or 5xx: it carries its status, its stable snake_case code and a
/// message for people, and becomes the JSON error body of API.md in one place (`Response.error`). Errors are made
/// only through the catalogue (`ErrorCatalogue.swift`), so each code has one status and one wording.
struct HTTPError: Error, Sendable {
    /// The codes of API.md's error bodies, each with its status. The codes of rejected ops are Model's own
    /// (`ModelError.Code`), carried by `.model`.
    enum Code: Sendable, Equatable {
        case badJSON
        case badRequest
        case unknownOp
        case invalidName
        case unauthorized
        case routeNotFound
        case collectionNotFound
        case viewNotFound
        case invalidView
        case itemNotFound
        case methodNotAllowed
        case requestTimeout
        case cursorExpired
        case collectionDeleted
        case preconditionFailed
        case payloadTooLarge
        case unsupportedMediaType
        case tooManyPolls
        case headersTooLarge
        case unsupportedTransferEncoding
        case internalError
        case storageUnavailable
        case shuttingDown
        case serverBusy
        case insufficientStorage
        case tooManyCollections
        case tooManyViews
        case model(ModelError.Code)

        var status: HTTPStatus {
            switch self {
            case .badJSON, .badRequest, .unknownOp, .invalidName, .invalidView, .model(.invalidID): .badRequest
            case .unauthorized: .unauthorized
            case .routeNotFound, .collectionNotFound, .viewNotFound, .itemNotFound: .notFound
            case .methodNotAllowed: .methodNotAllowed
            case .requestTimeout: .requestTimeout
            case .model, .tooManyCollections, .tooManyViews: .conflict
            case .cursorExpired, .collectionDeleted: .gone
            case .preconditionFailed: .preconditionFailed
            case .payloadTooLarge: .payloadTooLarge
            case .unsupportedMediaType: .unsupportedMediaType
            case .tooManyPolls: .tooManyRequests
            case .headersTooLarge: .requestHeaderFieldsTooLarge
            case .unsupportedTransferEncoding: .notImplemented
            case .internalError: .internalServerError
            case .storageUnavailable, .shuttingDown, .serverBusy, .insufficientStorage: .serviceUnavailable
            }
        }

        /// The code as it stands in the JSON body.
        var text: String {
            switch self {
            case .badJSON: "bad_json"
            case .badRequest: "bad_request"
            case .unknownOp: "unknown_op"
            case .invalidName: "invalid_name"
            case .unauthorized: "unauthorized"
            case .routeNotFound: "route_not_found"
            case .collectionNotFound: "collection_not_found"
            case .viewNotFound: "view_not_found"
            case .invalidView: "invalid_view"
            case .itemNotFound: "item_not_found"
            case .methodNotAllowed: "method_not_allowed"
            case .requestTimeout: "request_timeout"
            case .cursorExpired: "cursor_expired"
            case .collectionDeleted: "collection_deleted"
            case .preconditionFailed: "precondition_failed"
            case .payloadTooLarge: "payload_too_large"
            case .unsupportedMediaType: "unsupported_media_type"
            case .tooManyPolls: "too_many_polls"
            case .headersTooLarge: "headers_too_large"
            case .unsupportedTransferEncoding: "unsupported_transfer_encoding"
            case .internalError: "internal_error"
            case .storageUnavailable: "storage_unavailable"
            case .shuttingDown: "shutting_down"
            case .serverBusy: "server_busy"
            case .insufficientStorage: "insufficient_storage"
            case .tooManyCollections: "too_many_collections"
            case .tooManyViews: "too_many_views"
            case .model(let code): code.rawValue
            }
        }
    }

    let code: Code
    var message: String
    /// The index of the rejected op, for errors in a list of ops.
    var opIndex: Int?
    /// The collection's current version, for `410` on the change feed.
    var current: String?
    var headers: [(name: String, value: String)] = []
    /// Whether a feed's answer with this error may be stored by shared caches, as its status allows
    /// (`FeedCaching.Kind`): not when any client could make it, at a URL other clients will ask.
    var mayBeStored = true

    var status: HTTPStatus { code.status }

    init(_ code: Code, _ message: String, opIndex: Int? = nil, current: String? = nil) {
        self.code = code
        self.message = message
        self.opIndex = opIndex
        self.current = current
    }

    func with(header name: String, _ value: String) -> HTTPError {
        var copy = self
        copy.headers.append((name, value))
        return copy
    }

    /// With `Connection: close`: for the refusal of a server at one of its limits (held polls, memory for bodies
    /// or answers), a client that kept its connection to retry on it (as keep-alive clients do) held one of the
    /// connections kept back for `/healthz` and writes, and enough of them took them all; for a stopping server's.
    var closingTheConnection: HTTPError { with(header: "Connection", "close") }
}
