import Model

/// Why a record was refused when it was applied: it changed nothing. A plain value, free of HTTP: the routes map it
/// to a status and an error body (`ErrorCatalogue.swift`).
enum Rejection: Error, Sendable, Equatable {
    /// The record names a collection that does not exist (and does not create one).
    case collectionNotFound(String)
    /// The record names a view that does not exist.
    case viewNotFound(String)
    /// A condition of the request did not hold against the collection's version.
    case preconditionFailed(PreconditionFailure)
    /// Model refused the mutation (an invalid or duplicate id, a missing reference, an index out of range).
    case model(ModelError)
    /// A record that no request can produce (an invalid epoch): a bug or a damaged journal.
    case invalidRecord(String)
}

/// An `If-Match` that does not name the collection's version, or an `If-None-Match` that does.
struct PreconditionFailure: Sendable, Equatable {
    enum Header: String, Sendable {
        case ifMatch = "If-Match"
        case ifNoneMatch = "If-None-Match"
    }

    var header: Header
    /// The header's value as the client sent it.
    var value: String
    /// The collection's (or view's) version then; nil when it did not exist.
    var current: Version?
    /// Whose version the condition was checked against.
    var subject: FeedSubjectKind = .collection
}
