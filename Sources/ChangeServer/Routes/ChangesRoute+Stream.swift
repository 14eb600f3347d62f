import Model

/// `GET /v1/collections/{name}/changes?since=<version>` with `Accept: text/event-stream`: the change feed as
/// Server-Sent Events (API.md, "Stream"). Errors found before the stream starts (a malformed `since`, an unknown
/// collection, too many held connections) are plain JSON answers; once it has started, an expired cursor or a
/// deleted collection is `event: gone`, and the stream ends.
extension App {
    static func acceptsEventStream(_ request: Request) -> Bool {
        request.header("Accept")?.lowercased().contains("text/event-stream") == true
    }

    func stream(_ request: Request, _ name: String) throws(HTTPError) -> RouteResult {
        _ = try pollTimeout(request)
        // `Last-Event-ID` (what a browser's EventSource sends when it reconnects) stands for an absent `since`.
        var raw = request.rawQuery("since")
        var text = try raw.map { (raw) throws(HTTPError) -> String in
            guard let text = percentDecoded(Substring(raw)) else { throw Self.badSince(raw) }
            return text
        }
        if raw == nil, let lastEventID = request.header("Last-Event-ID")?.trimmingSpaces(), !lastEventID.isEmpty {
            raw = lastEventID
            text = lastEventID
        }
        let since = try text.map { (text) throws(HTTPError) -> Version? in
            if let version = Version(text) { return version }
            if Self.hasVersionForm(text) { return nil }
            throw Self.badSince(raw ?? text)
        }
        let entry = try existing(name)
        guard metrics.heldConnections < config.maxHeldPolls else { throw .tooManyPolls(limit: config.maxHeldPolls) }
        let opening = ServerSentEvents.opening
        guard let since else {
            let (version, sections) = entry.content.withLock { ($0.version, $0.snapshot()) }
            var writer = JSONWriter()
            writer.object { writer in
                writer.field("collection", name)
                writer.field("reset") { $0.raw("true") }
                writer.field("to", version.description)
                writer.field("next", FeedCaching.next(to: version, timeout: Self.defaultPollTimeout))
                writer.field("snapshot") { $0.snapshot(collection: name, version: version, sections: sections) }
            }
            let reset = ServerSentEvents.event("reset", id: version.description, json: writer.bytes)
            return .stream(StreamStart(entry: entry, version: version, initial: opening + reset, ends: false))
        }
        let (current, changeset) = entry.content.withLock { state in
            (state.version, since.flatMap { state.changes(since: $0) })
        }
        guard let since, let changeset else {
            let gone = ServerSentEvents.gone(.cursorExpired(raw ?? "", current: current))
            return .stream(StreamStart(entry: entry, version: current, initial: opening + gone, ends: true))
        }
        if changeset.isEmpty {
            return .stream(StreamStart(entry: entry, version: since, initial: opening, ends: false))
        }
        metrics.changesetsDelivered(1)
        let changes = ServerSentEvents.changes(collection: name, changeset: changeset)
        return .stream(StreamStart(entry: entry, version: current, initial: opening + changes, ends: false))
    }
}
