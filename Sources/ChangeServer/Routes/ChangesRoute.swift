import Model

/// `GET /v1/collections/{name}/changes?since=<version>&timeout=<seconds>&cursor=<n>`: the long-poll change feed.
extension App {
    static let defaultPollTimeout = 25
    static let maximumPollTimeout = 300

    func changes(_ request: Request, _ name: String, _ connection: Connection) throws(HTTPError) -> RouteResult {
        if Self.acceptsEventStream(request) { return try stream(request, name) }
        let timeout = try pollTimeout(request)
        var since: Version?
        /// A cursor of the right form whose sequence number does not even fit in 64 bits: ahead of any version.
        var sinceIsBeyondAnyVersion = false
        if let raw = request.rawQuery("since") {
            guard let text = percentDecoded(Substring(raw)) else { throw Self.badSince(raw) }
            if let version = Version(text) {
                since = version
            } else if Self.hasVersionForm(text) {
                sinceIsBeyondAnyVersion = true
            } else {
                throw Self.badSince(raw)
            }
        }
        let cursor = try pollCursor(request)
        let entry = try existing(name)
        if sinceIsBeyondAnyVersion {
            let current = entry.content.withLock { $0.version }
            throw .cursorExpired(request.rawQuery("since") ?? "", current: current)
        }
        let caching = feedCaching
        let ifNoneMatch = request.header("If-None-Match")
        guard let since else {
            let (version, sections) = entry.content.withLock { ($0.version, $0.snapshot()) }
            let tag = FeedCaching.resetEntityTag(version)
            let headers = [("Cache-Control", caching.cacheControl(.reset)), ("ETag", tag)]
            if FeedCaching.matches(ifNoneMatch: ifNoneMatch, tag) {
                return .respond(Response(.notModified, headers: headers))
            }
            return .respond(
                .json(.ok, headers: headers) { writer in
                    writer.object { writer in
                        writer.field("collection", name)
                        writer.field("reset") { $0.raw("true") }
                        writer.field("to", version.description)
                        writer.field("next", FeedCaching.next(to: version, timeout: timeout))
                        writer.field("snapshot") { $0.snapshot(collection: name, version: version, sections: sections) }
                    }
                })
        }
        let (current, changeset) = entry.content.withLock { ($0.version, $0.changes(since: since)) }
        guard let changeset else { throw .cursorExpired(since.description, current: current) }
        if !changeset.isEmpty {
            let tag = FeedCaching.entityTag(from: since, to: current)
            let headers = [("Cache-Control", caching.cacheControl(.changes)), ("ETag", tag)]
            if FeedCaching.matches(ifNoneMatch: ifNoneMatch, tag) {
                return .respond(Response(.notModified, headers: headers))
            }
            metrics.changesetsDelivered(1)
            let next = FeedCaching.next(to: current, timeout: timeout)
            return .respond(
                .json(.ok, headers: headers) { $0.feedChanges(collection: name, changeset: changeset, next: next) })
        }
        if timeout == 0 {
            let nextCursor = FeedCaching.nextCursor(after: cursor, timeout: timeout)
            let headers = [
                ("Cache-Control", caching.cacheControl(.empty)),
                ("ETag", FeedCaching.entityTag(from: since, to: since, cursor: nextCursor)),
            ]
            let next = FeedCaching.next(at: since, timeout: timeout, cursor: nextCursor)
            return .respond(
                .json(.ok, headers: headers) { $0.feedChanges(collection: name, changeset: changeset, next: next) })
        }
        guard metrics.heldConnections < config.maxHeldPolls else { throw .tooManyPolls(limit: config.maxHeldPolls) }
        connection.hold(on: entry, since: since, timeout: timeout, cursor: cursor)
        return .later
    }

    /// How feed answers are marked for caches: shared unless reads need a token.
    var feedCaching: FeedCaching { FeedCaching(isShared: config.readToken == nil) }

    static func badSince(_ raw: String) -> HTTPError {
        .badRequest("since must be a version \"<epoch>.<seq>\", not '\(raw)'.")
    }

    /// `<epoch>.<digits>`, whatever the number of digits.
    static func hasVersionForm(_ text: String) -> Bool {
        guard let dot = text.lastIndex(of: ".") else { return false }
        let digits = text[text.index(after: dot)...]
        return Version.isValidEpoch(String(text[..<dot])) && !digits.isEmpty
            && digits.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    func pollTimeout(_ request: Request) throws(HTTPError) -> Int {
        guard let raw = request.rawQuery("timeout") else { return Self.defaultPollTimeout }
        guard !raw.isEmpty, raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw .badRequest(
                "timeout must be a non-negative integer of seconds, not '\(raw)'.")
        }
        return Int(raw).map { min($0, Self.maximumPollTimeout) } ?? Self.maximumPollTimeout
    }

    /// The optional `cursor` of a `next` query string: a non-negative integer up to `FeedCaching.maximumCursor`.
    private func pollCursor(_ request: Request) throws(HTTPError) -> Int64? {
        guard let raw = request.rawQuery("cursor") else { return nil }
        guard !raw.isEmpty, raw.utf8.count <= 16, raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int64(raw), value <= FeedCaching.maximumCursor
        else {
            throw .badRequest("cursor must be an integer from 0 to \(FeedCaching.maximumCursor), not '\(raw)'.")
        }
        return value
    }
}
