extension Response {
    /// A snapshot read: its JSON as encoded once for its version, with the version as `ETag`.
    static func snapshot(_ snapshot: EncodedSnapshot) -> Response {
        Response(
            .ok, headers: [("Content-Type", jsonContentType), ("ETag", EntityTags.quoted(snapshot.version))],
            body: snapshot.json)
    }
}
