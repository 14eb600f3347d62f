/// The `code` of the contract's error body (`{"error": {"code", "message"}}`; the README's "Errors" table): stable,
/// what an app matches on, where `message` is for people. A code this build does not name is kept as it came.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    // 400
    public static let badJSON = ErrorCode(rawValue: "bad_json")
    public static let badRequest = ErrorCode(rawValue: "bad_request")
    public static let unknownOp = ErrorCode(rawValue: "unknown_op")
    public static let invalidID = ErrorCode(rawValue: "invalid_id")
    public static let invalidName = ErrorCode(rawValue: "invalid_name")
    public static let invalidView = ErrorCode(rawValue: "invalid_view")
    // 401
    public static let unauthorized = ErrorCode(rawValue: "unauthorized")
    // 404
    public static let routeNotFound = ErrorCode(rawValue: "route_not_found")
    public static let collectionNotFound = ErrorCode(rawValue: "collection_not_found")
    public static let viewNotFound = ErrorCode(rawValue: "view_not_found")
    public static let itemNotFound = ErrorCode(rawValue: "item_not_found")
    // 405
    public static let methodNotAllowed = ErrorCode(rawValue: "method_not_allowed")
    // 408
    public static let requestTimeout = ErrorCode(rawValue: "request_timeout")
    // 409 (also `itemNotFound`, for an op naming an item that is not there)
    public static let duplicateID = ErrorCode(rawValue: "duplicate_id")
    public static let duplicateReference = ErrorCode(rawValue: "duplicate_reference")
    public static let sectionNotFound = ErrorCode(rawValue: "section_not_found")
    public static let indexOutOfRange = ErrorCode(rawValue: "index_out_of_range")
    public static let tooManyCollections = ErrorCode(rawValue: "too_many_collections")
    public static let tooManyViews = ErrorCode(rawValue: "too_many_views")
    // 410
    public static let cursorExpired = ErrorCode(rawValue: "cursor_expired")
    public static let collectionDeleted = ErrorCode(rawValue: "collection_deleted")
    // 412
    public static let preconditionFailed = ErrorCode(rawValue: "precondition_failed")
    // 413, 415, 429, 431
    public static let payloadTooLarge = ErrorCode(rawValue: "payload_too_large")
    public static let unsupportedMediaType = ErrorCode(rawValue: "unsupported_media_type")
    public static let tooManyPolls = ErrorCode(rawValue: "too_many_polls")
    public static let headersTooLarge = ErrorCode(rawValue: "headers_too_large")
    // 500, 501
    public static let internalError = ErrorCode(rawValue: "internal_error")
    public static let unsupportedTransferEncoding = ErrorCode(rawValue: "unsupported_transfer_encoding")
    // 503
    public static let shuttingDown = ErrorCode(rawValue: "shutting_down")
    public static let storageUnavailable = ErrorCode(rawValue: "storage_unavailable")
    public static let insufficientStorage = ErrorCode(rawValue: "insufficient_storage")
    public static let serverBusy = ErrorCode(rawValue: "server_busy")

    /// Every code above, in the order of the README's "Errors" table.
    static let catalogue: [ErrorCode] = [
        .badJSON, .badRequest, .unknownOp, .invalidID, .invalidName, .invalidView, .unauthorized, .routeNotFound,
        .collectionNotFound, .viewNotFound, .itemNotFound, .methodNotAllowed, .requestTimeout, .duplicateID,
        .duplicateReference, .sectionNotFound, .indexOutOfRange, .tooManyCollections, .tooManyViews, .cursorExpired,
        .collectionDeleted, .preconditionFailed, .payloadTooLarge, .unsupportedMediaType, .tooManyPolls,
        .headersTooLarge, .internalError, .unsupportedTransferEncoding, .shuttingDown, .storageUnavailable,
        .insufficientStorage, .serverBusy,
    ]
}
