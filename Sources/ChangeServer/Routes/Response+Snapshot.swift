import Model

extension Response {
    /// A snapshot read: its JSON as encoded once for its version, with the version as `ETag`. Shared by the reads
    /// of that version (`EncodedSnapshot`).
    static func snapshot(_ json: [UInt8], at version: Version) -> Response {
        var response = Response(
            .ok, headers: [("Content-Type", jsonContentType), ("ETag", EntityTags.quoted(version))], body: json)
        response.share = ResponseShare()
        return response
    }

    /// The answer to a read whose `If-None-Match` names the current version.
    static func notModified(at version: Version) -> Response {
        var response = Response(.notModified, headers: [("ETag", EntityTags.quoted(version))])
        response.share = ResponseShare()
        return response
    }
}
