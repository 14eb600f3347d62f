import Model

/// Every error the server answers with, defined once: its code (and so its status) and its wording. Handlers and
/// the feed throw these; `Response.error` writes them; plain errors from the commit path (`Rejection`,
/// `StorageError`) and from Model (`ModelError`) are mapped here and nowhere else.
extension HTTPError {
    static func routeNotFound(_ path: String) -> HTTPError {
        HTTPError(.routeNotFound, "No resource at \(path).")
    }

    static func methodNotAllowed(_ method: String, _ route: Route) -> HTTPError {
        let allowed = (route.methods + ["OPTIONS"]).joined(separator: ", ")
        return HTTPError(.methodNotAllowed, "\(method) is not allowed on \(route.template); allowed: \(allowed).")
            .with(header: "Allow", allowed)
    }

    /// With `Connection: close`: a client's next request goes to a new connection, which a stopping server
    /// refuses plainly, instead of one the server may close as it sends (`HTTPServer.run`).
    static let shuttingDown = HTTPError(.shuttingDown, "The server is shutting down; retry shortly.")
        .with(header: "Retry-After", "1").closingTheConnection

    static let stoppedBeforeCompletion = HTTPError(
        .shuttingDown, "The server stopped before this request could be completed; retry shortly."
    ).with(header: "Retry-After", "1").closingTheConnection

    static func unauthorized(tokenPresented: Bool) -> HTTPError {
        HTTPError(
            .unauthorized,
            tokenPresented
                ? "The bearer token is not valid here." : "This request needs \"Authorization: Bearer <token>\"."
        ).with(header: "WWW-Authenticate", "Bearer realm=\"changeserver\"")
    }

    static let repeatedAuthorization = HTTPError(
        .badRequest, "The request has several Authorization headers; it takes one, with one bearer token.")

    static func unsupportedMediaType(_ contentType: String, isForm: Bool) -> HTTPError {
        HTTPError(
            .unsupportedMediaType,
            "Bodies are JSON: send Content-Type: application/json, not \(contentType)"
                + (isForm ? " (curl -d sends that: use curl --json)." : "."))
    }

    static func unsupportedCharset(_ contentType: String) -> HTTPError {
        HTTPError(
            .unsupportedMediaType,
            "Bodies are JSON in UTF-8: send charset=utf-8 (or us-ascii) or none, not \(contentType).")
    }

    static func unsupportedContentEncoding(_ coding: String) -> HTTPError {
        HTTPError(
            .unsupportedMediaType,
            "Bodies are not decoded: send them without Content-Encoding (or with identity), not \(coding).")
    }

    static func payloadTooLarge(limit: Int) -> HTTPError {
        HTTPError(.payloadTooLarge, "The body is larger than the limit of \(limit) bytes (--max-body-bytes).")
    }

    static func recordTooLarge(bytes: Int, limit: Int) -> HTTPError {
        HTTPError(
            .payloadTooLarge,
            "The mutation takes \(bytes) bytes once encoded, more than the journal's limit of \(limit) for one record.")
    }

    static let conflictingContentLength = HTTPError(
        .badRequest, "The request has two different Content-Length headers: where its body ends is unknown.")

    static let lengthAndTransferCoding = HTTPError(
        .badRequest,
        "The request has both Content-Length and Transfer-Encoding: send one of them; the connection is closed.")

    static func hostMissingOrRepeated(lines: Int) -> HTTPError {
        HTTPError(
            .badRequest,
            lines == 0
                ? "An HTTP/1.1 request needs a Host header." : "The request has \(lines) Host headers; it takes one.")
    }

    static func invalidHost(_ value: String) -> HTTPError {
        HTTPError(
            .badRequest,
            "The Host header '\(value)' is not a host name or address with an optional port (RFC 9112 "
                + "§3.2). The connection is closed.")
    }

    static let malformedTarget = HTTPError(
        .badRequest,
        "The request target holds a space, a control character, DEL or a '#', which it may hold only "
            + "percent-encoded (%20 for a space); a bare CR in the request line does too. The connection is closed.")

    static let malformedHeader = HTTPError(
        .badRequest,
        "A header line is malformed: folded onto the next (a line that starts with a space or a tab), a name "
            + "with a space or another character names cannot have, or a value holding a NUL; send each header as "
            + "'Name: value' on one line. The connection is closed.")

    static func unsupportedTransferEncoding(_ coding: String) -> HTTPError {
        HTTPError(
            .unsupportedTransferEncoding,
            "Transfer-Encoding '\(coding)' is not supported: send the body with Content-Length, or chunked alone.")
    }

    static func headersTooLarge(limit: Int) -> HTTPError {
        HTTPError(
            .headersTooLarge,
            "The request's headers leave no room for the answer's in this server's \(limit) bytes per connection "
                + "(--connection-memory): send smaller headers.")
    }

    static func bodyTimedOut(seconds: Int) -> HTTPError {
        HTTPError(
            .requestTimeout,
            "No byte of the body arrived for \(seconds) s (--body-timeout): the request is dropped and the connection "
                + "closed; send it again.")
    }

    static func headersTimedOut(seconds: Int) -> HTTPError {
        HTTPError(
            .requestTimeout,
            "The request's headers did not all arrive within \(seconds) s of its first bytes (--header-timeout): "
                + "the connection is closed; send the request again.")
    }

    static func bodyMemoryFull(limit: Int) -> HTTPError {
        HTTPError(
            .serverBusy,
            "The request bodies being received already take the \(limit) bytes allowed (--max-body-memory); retry shortly."
        ).with(header: "Retry-After", "1").closingTheConnection
    }

    static func responseMemoryFull(limit: Int) -> HTTPError {
        HTTPError(
            .serverBusy,
            "The answers being sent already hold the \(limit) bytes allowed for large answers "
                + "(--max-response-memory) until their clients take them; retry shortly."
        ).with(header: "Retry-After", "1").closingTheConnection
    }

    static func insufficientStorage(free: Int, reserve: Int) -> HTTPError {
        HTTPError(
            .insufficientStorage,
            "The data directory has \(free) bytes free, less than the \(reserve) kept for snapshots "
                + "(--disk-reserve-bytes); writes resume once there is room. Reads and deletions still work."
        ).with(header: "Retry-After", "10")
    }

    static func tooManyViews(limit: Int) -> HTTPError {
        HTTPError(.tooManyViews, "The server holds as many views as it may (--max-views \(limit)); delete one first.")
    }

    static func tooManyCollections(limit: Int) -> HTTPError {
        HTTPError(
            .tooManyCollections,
            "The server holds as many collections as it may (--max-collections \(limit)); delete one first.")
    }

    static func badCursor(_ raw: String, _ kind: FeedSubjectKind) -> HTTPError {
        HTTPError(.badRequest, "after must be a \(kind.rawValue) name, not '\(raw)'.")
    }

    static func badLimit(_ raw: String) -> HTTPError {
        HTTPError(.badRequest, "limit must be an integer from 1 to \(App.maximumListLimit), not '\(raw)'.")
    }

    static let malformedPath = HTTPError(
        .badRequest, "The path has a malformed percent-encoding, or bytes that are not UTF-8 (raw or encoded).")

    /// A collection's or a view's name, as the path says, breaks the name pattern.
    static func invalidName(_ kind: FeedSubjectKind) -> HTTPError {
        HTTPError(
            .invalidName,
            "A \(kind.rawValue) name is 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit."
        )
    }

    static func badRequest(_ message: String) -> HTTPError {
        HTTPError(.badRequest, message)
    }

    static func unknownOp(_ message: String) -> HTTPError {
        HTTPError(.unknownOp, message)
    }

    static func badJSON(_ detail: String) -> HTTPError {
        HTTPError(.badJSON, "The body is not valid JSON: \(detail).")
    }

    static func collectionNotFound(_ name: String) -> HTTPError {
        HTTPError(.collectionNotFound, "There is no collection '\(name)'.")
    }

    static func itemNotFound(_ id: String, in name: String) -> HTTPError {
        HTTPError(.itemNotFound, "There is no item '\(id)' in the collection '\(name)'.")
    }

    static func itemNotInView(_ id: String, _ view: String) -> HTTPError {
        HTTPError(
            .itemNotFound,
            "The view '\(view)' shows no item '\(id)' (its source may hold one that the view leaves out).")
    }

    static func cursorExpired(_ since: String, current: Version) -> HTTPError {
        HTTPError(
            .cursorExpired,
            "Version \(since) is not in the kept history (too old, of another epoch, or ahead); "
                + "fetch the snapshot again.", current: current.description)
    }

    /// `cursorExpired` for a version ahead of the current one (of its epoch, or beyond any version). Never stored
    /// by caches: that URL is the `next` every client polls once the collection reaches that version, and a `410`
    /// any client could ask for before then was handed to all of them from the cache (they reset, in a loop).
    static func cursorAhead(_ since: String, current: Version) -> HTTPError {
        var error = cursorExpired(since, current: current)
        error.mayBeStored = false
        return error
    }

    /// A held poll's collection or view was deleted (`410 collection_deleted` for both, as API.md says).
    static func deleted(_ kind: FeedSubjectKind, _ name: String) -> HTTPError {
        HTTPError(.collectionDeleted, "The \(kind.rawValue) '\(name)' was deleted.")
    }

    static func viewNotFound(_ name: String) -> HTTPError {
        HTTPError(.viewNotFound, "There is no view '\(name)'.")
    }

    static func invalidView(_ error: ViewDefinitionError) -> HTTPError {
        HTTPError(.invalidView, "The view definition is not valid: \(error).")
    }

    static func viewsAreReadOnly(_ method: String, _ route: Route) -> HTTPError {
        HTTPError(
            .methodNotAllowed,
            "\(method) is not allowed on \(route.template): views are read-only, written only through their source."
        )
        .with(header: "Allow", (route.methods + ["OPTIONS"]).joined(separator: ", "))
    }

    static func tooManyPolls(limit: Int) -> HTTPError {
        HTTPError(.tooManyPolls, "The server holds as many polls as it may (--max-held-polls \(limit)); retry shortly.")
            .with(header: "Retry-After", "1").closingTheConnection
    }

    /// An `If-Match` or `If-None-Match` on a write that is neither `*` nor a list of versions.
    static func malformedCondition(_ header: String) -> HTTPError {
        HTTPError(
            .badRequest,
            "\(header) must be * or a list of versions as the ETag names them (\"E.3\", W/\"E.3\" or E.3); "
                + "it names nothing this server's versions could match, so the write was not taken.")
    }

    /// An `If-Match` that names no strong entity tag: empty, or weak tags only.
    static let weakIfMatch = HTTPError(
        .preconditionFailed,
        "If-Match names no strong entity tag: it is empty, or holds only weak tags (W/\"…\"), which never match "
            + "(If-Match compares strongly).")

    static let storageUnavailable = HTTPError(
        .storageUnavailable, "The mutation could not be written to storage and was not applied; retry later."
    ).with(header: "Retry-After", "1")

    // MARK: Mapping plain errors

    /// A rejected op: `400` for an invalid id, `409` for every conflict with the collection's content.
    init(_ error: ModelError) {
        self.init(.model(error.code), error.message, opIndex: error.opIndex)
    }

    init(_ error: StorageError) {
        switch error {
        case .unavailable: self = .storageUnavailable
        case .recordTooLarge(let bytes, let limit): self = .recordTooLarge(bytes: bytes, limit: limit)
        }
    }

    init(_ rejection: Rejection) {
        switch rejection {
        case .collectionNotFound(let name):
            self = .collectionNotFound(name)
        case .viewNotFound(let name):
            self = .viewNotFound(name)
        case .model(let error):
            self.init(error)
        case .invalidRecord(let reason):
            self.init(.internalError, "The mutation could not be applied: \(reason).")
        case .preconditionFailed(let failure):
            let subject = failure.subject.rawValue
            switch failure.header {
            case .ifMatch:
                let current = failure.current.map { " (it is at \($0))" } ?? " (it does not exist)"
                self.init(
                    .preconditionFailed, "If-Match \(failure.value) does not match the \(subject)'s version\(current).",
                    current: failure.current?.description)
            case .ifNoneMatch:
                self.init(
                    .preconditionFailed,
                    "If-None-Match \(failure.value) matches the \(subject)'s version "
                        + (failure.current.map(\.description) ?? ""), current: failure.current?.description)
            }
        }
    }
}
