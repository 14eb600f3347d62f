import Model

/// `GET /v1/collections/{name}/changes?since=<version>` (or a view's) with `Accept: text/event-stream`: the change feed as
/// Server-Sent Events (API.md, "Stream"). Errors found before the stream starts (a malformed `since`, an unknown
/// collection, too many held connections) are plain JSON answers; once it has started, an expired cursor or a
/// deleted collection is `event: gone`, and the stream ends.
extension App {
    /// Whether `Accept` lists `text/event-stream` with a weight above 0 (a weight of 0 means "not this one").
    static func acceptsEventStream(_ request: Request) -> Bool {
        guard let accept = request.listHeader("Accept") else { return false }
        return accept.split(separator: ",").contains { range in
            let parts = range.split(separator: ";").map { String($0).trimmingSpaces().lowercased() }
            guard parts.first == "text/event-stream" else { return false }
            guard let weight = parts.dropFirst().first(where: { $0.hasPrefix("q=") }) else { return true }
            return (Double(weight.dropFirst(2)) ?? 1) > 0
        }
    }

    /// Whether a stream resumes from `Last-Event-ID` rather than from the URL's `since` (decoded; nil when absent).
    static func lastEventID(_ lastEventID: String, supersedes since: String?) -> Bool {
        guard let since else { return true }
        guard let resumed = Version(lastEventID), let opened = Version(since) else { return false }
        return resumed.epoch == opened.epoch && resumed.seq > opened.seq
    }

    func stream(_ request: Request, _ subject: FeedSubject, _ connection: Connection) throws(HTTPError) -> RouteResult {
        _ = try pollTimeout(request)
        var raw = request.rawQuery("since")
        var text = try raw.map { (raw) throws(HTTPError) -> String in
            guard let text = percentDecoded(Substring(raw)) else { throw Self.badSince(raw) }
            return text
        }
        // A browser's EventSource reconnects to the URL it was opened with, `since` and all, and sends the id of
        // the last event it received as `Last-Event-ID`: that is where the client is. It stands for an absent
        // `since` (API.md), and for one it is a later version of (the same epoch), which the client has moved past:
        // answering from the URL's `since` would send it changes it has already applied.
        if let lastEventID = request.header("Last-Event-ID")?.trimmingSpaces(), !lastEventID.isEmpty,
            Self.lastEventID(lastEventID, supersedes: text)
        {
            raw = lastEventID
            text = lastEventID
        }
        let since = try text.map { (text) throws(HTTPError) -> Version? in
            if let version = Version(text) { return version }
            if Version.hasForm(text) { return nil }
            throw Self.badSince(raw ?? text)
        }
        guard metrics.heldConnections < config.maxHeldPolls else { throw .tooManyPolls(limit: config.maxHeldPolls) }
        var generator = SystemRandomNumberGenerator()
        let opening = ServerSentEvents.opening(using: &generator)
        guard let since else {
            // A `HEAD` gets the headers alone: no snapshot is encoded for it.
            if request.method == "HEAD" {
                return .stream(StreamStart(subject: subject, version: subject.version, initial: opening, ends: true))
            }
            return resetStream(subject, opening, connection)
        }
        let current: Version
        let changeset: Changeset?
        if let since {
            (current, changeset) = subject.changes(since: since)
        } else {
            (current, changeset) = (subject.version, nil)
        }
        guard let since, let changeset else {
            // As a held poll: with a shared database, a cursor from a server that applied more than this one yet is
            // followed from there once this server catches up (`StreamHub`), never `gone`.
            if let since, committer.isShared, since.epoch == current.epoch, since.seq > current.seq {
                return .stream(StreamStart(subject: subject, version: since, initial: opening, ends: false))
            }
            if let since { noteCursorBehindHistory(subject, since: since, current: current) }
            let gone = ServerSentEvents.gone(.cursorExpired(raw ?? "", current: current))
            return .stream(StreamStart(subject: subject, version: current, initial: opening + gone, ends: true))
        }
        // Changes that cancel out still move the stream to the current version, as a poll's answer does.
        if changeset.isEmpty && current == since {
            return .stream(StreamStart(subject: subject, version: since, initial: opening, ends: false))
        }
        metrics.changesetsDelivered(1)
        let changes = ServerSentEvents.changes(subject.kind, name: subject.name, changeset: changeset)
        return .stream(StreamStart(subject: subject, version: current, initial: opening + changes, ends: false))
    }

    /// A stream opened without a version starts with the snapshot (`event: reset`), shared with the streams opened
    /// at its version while one still holds it (`StreamReset`); one that takes long to encode
    /// (`FeedSubject.encodingIsSlow`) is made on a bulk thread of the reads' pool, and the stream starts from there,
    /// as a large read is answered (`answerRead`).
    private func resetStream(_ subject: FeedSubject, _ opening: [UInt8], _ connection: Connection) -> RouteResult {
        @Sendable func start(_ reset: StreamReset) -> StreamStart {
            StreamStart(subject: subject, version: reset.version, initial: opening, reset: reset, ends: false)
        }
        if let shared = subject.encodedSnapshot.sharedStreamReset(at: subject.version) { return .stream(start(shared)) }
        guard subject.encodingIsSlow else { return .stream(start(StreamReset.current(of: subject))) }
        BulkThreads.reads.run { connection.startStream(start(StreamReset.current(of: subject))) }
        return .later
    }
}
