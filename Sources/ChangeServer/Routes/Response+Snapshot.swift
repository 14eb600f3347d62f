import Model

extension Response {
    /// A snapshot read: its JSON as encoded once for its version, with the version as `ETag`. Shared by the reads
    /// of that version (`EncodedSnapshot`).
    static func snapshot(_ json: [UInt8], at version: Version) -> Response {
        var response = Response(.ok, headers: snapshotHeaders(version), body: json)
        response.share = ResponseShare()
        return response
    }

    /// A snapshot read whose body is held apart (`ResponseBytes`), with the headers of `snapshot(_:at:)`.
    static func snapshot(sharing body: ResponseBytes, at version: Version) -> Response {
        var response = Response(.ok, headers: snapshotHeaders(version))
        response.sharedBody = body
        return response
    }

    private static func snapshotHeaders(_ version: Version) -> [(name: String, value: String)] {
        [
            ("Content-Type", jsonContentType), ("ETag", EntityTags.quoted(version)),
            ("Cache-Control", snapshotCacheControl),
        ]
    }

    /// The answer to a read whose `If-None-Match` names the version of `read`, a `snapshot`: shared as it is.
    static func snapshotNotModified(answering read: Response) -> Response {
        var response = Response.notModified(answering: read)
        response.share = ResponseShare()
        return response
    }

    /// A snapshot may be kept by a cache, but must be revalidated before every use (its `ETag` makes that a
    /// `304`): without a word, a CDN applied its own default lifetime (often an hour) and served an old version,
    /// and a client whose cursor of it had left the history got `410`, fetched the same old snapshot, and looped.
    /// A shared cache never uses it for a request with a token (RFC 9111 §3.5: `no-cache` does not allow that).
    static let snapshotCacheControl = "no-cache"

    /// What every other answer to a `GET` or `HEAD` that says nothing of caching gets (`App.handle`): lists, items,
    /// `/healthz`, `/metrics` and errors change at any moment, and have no `ETag` to revalidate with.
    static let notStored = "no-store"
}
