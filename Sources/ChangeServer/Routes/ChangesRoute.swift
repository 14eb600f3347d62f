import Model

/// `GET /v1/collections/{name}/changes` and `GET /v1/views/{name}/changes`
/// (`?since=<version>&timeout=<seconds>&cursor=<n>`): the long-poll change feed, or with
/// `Accept: text/event-stream` the event stream, the same for a collection and a view.
extension App {
    static let defaultPollTimeout = 25
    static let maximumPollTimeout = 300

    func changes(_ request: Request, _ subject: () throws(HTTPError) -> FeedSubject, _ connection: Connection)
        throws(HTTPError) -> RouteResult
    {
        if Self.acceptsEventStream(request) { return try stream(request, try subject(), connection) }
        let timeout = try pollTimeout(request)
        var since: Version?
        /// A cursor of the right form whose sequence number does not even fit in 64 bits: ahead of any version.
        var sinceIsBeyondAnyVersion = false
        if let raw = request.rawQuery("since") {
            guard let text = percentDecoded(Substring(raw)) else { throw Self.badSince(raw) }
            if let version = Version(text) {
                since = version
            } else if Version.hasForm(text) {
                sinceIsBeyondAnyVersion = true
            } else {
                throw Self.badSince(raw)
            }
        }
        let cursor = try pollCursor(request)
        let subject = try subject()
        if sinceIsBeyondAnyVersion { throw .cursorAhead(request.rawQuery("since") ?? "", current: subject.version) }
        let caching = feedCaching
        let ifNoneMatch = request.listHeader("If-None-Match").map(EntityTags.init)
        guard let since else {
            if let shared = Self.sharedReset(subject, timeout: timeout, ifNoneMatch: ifNoneMatch, caching: caching) {
                return .respond(shared)
            }
            return answerRead(of: subject, connection) { [self] in
                reset(subject, timeout: timeout, ifNoneMatch: ifNoneMatch, caching: caching)
            }
        }
        let (current, changeset) = subject.changes(since: since)
        guard let changeset else {
            // With a shared database, a cursor can come from a server that applied more than this one yet: it is
            // held until this server catches up (at its timeout it gets the empty changeset), never 410.
            let isAhead = since.epoch == current.epoch && since.seq > current.seq
            guard committer.isShared, isAhead else {
                noteCursorBehindHistory(subject, since: since, current: current)
                throw isAhead
                    ? .cursorAhead(since.description, current: current)
                    : .cursorExpired(since.description, current: current)
            }
            guard timeout > 0 else { return .respond(emptyAnswer(subject, since, timeout, cursor, caching)) }
            guard metrics.heldConnections < config.maxHeldPolls else { throw .tooManyPolls(limit: config.maxHeldPolls) }
            connection.hold(on: subject, since: since, timeout: timeout, cursor: cursor)
            return .later
        }
        // Changes that cancel out (an item that left a view's filter and came back) still move the version: the
        // answer is the empty changeset from `since` to the current version, at once, as for a held poll.
        if !changeset.isEmpty || current != since {
            let tag = FeedCaching.entityTag(from: since, to: current)
            let headers = caching.headers(.changes) + [("ETag", tag)]
            let next = FeedCaching.next(to: current, timeout: timeout)
            let ok = Response.json(.ok, headers: headers) {
                $0.feedChanges(subject.kind, name: subject.name, changeset: changeset, next: next)
            }
            if ifNoneMatch?.matchesWeakly(tag) == true { return .respond(.notModified(answering: ok)) }
            metrics.changesetsDelivered(1)
            return .respond(ok)
        }
        if timeout == 0 { return .respond(emptyAnswer(subject, since, timeout, cursor, caching)) }
        guard metrics.heldConnections < config.maxHeldPolls else { throw .tooManyPolls(limit: config.maxHeldPolls) }
        connection.hold(on: subject, since: since, timeout: timeout, cursor: cursor)
        return .later
    }

    /// The feed's answer to a poll without `since`: the whole snapshot. One too large to be kept is held apart
    /// (`ResponseBytes`) and shared with the resets to the same version and timeout while it is being sent, as a
    /// snapshot read's body is (`SnapshotCache.sharedLargeReset`).
    private func reset(_ subject: FeedSubject, timeout: Int, ifNoneMatch: EntityTags?, caching: FeedCaching)
        -> Response
    {
        // Resets that came together were handed off the loop before the first was written: they share it here.
        if let shared = Self.sharedReset(subject, timeout: timeout, ifNoneMatch: ifNoneMatch, caching: caching) {
            return shared
        }
        let generation = subject.encodedSnapshot.generation
        let snapshot = subject.snapshotJSON()
        let version = snapshot.version
        var ok = Response.json(.ok, headers: Self.resetHeaders(caching, version)) {
            $0.feedReset(
                subject.kind, name: subject.name, to: version, next: FeedCaching.next(to: version, timeout: timeout),
                snapshot: snapshot.json)
        }
        if ifNoneMatch?.matchesWeakly(FeedCaching.resetEntityTag(version)) == true {
            return .notModified(answering: ok)
        }
        guard ok.body.count > ResponseBytes.countedSize,
            let bytes = ResponseBytes(copying: ok.body, budget: responseBudget)
        else { return ok }
        subject.encodedSnapshot.shareLargeReset(bytes, at: version, timeout: timeout, writtenAt: generation)
        ok.body = []
        ok.sharedBody = bytes
        return ok
    }

    /// The reset to the current version for polls of `timeout` from the body of one still being sent, if any.
    private static func sharedReset(
        _ subject: FeedSubject, timeout: Int, ifNoneMatch: EntityTags?, caching: FeedCaching
    ) -> Response? {
        let version = subject.version
        guard let shared = subject.encodedSnapshot.sharedLargeReset(at: version, timeout: timeout) else { return nil }
        var ok = Response(.ok, headers: [("Content-Type", Response.jsonContentType)] + resetHeaders(caching, version))
        ok.sharedBody = shared
        let tag = FeedCaching.resetEntityTag(version)
        return ifNoneMatch?.matchesWeakly(tag) == true ? .notModified(answering: ok) : ok
    }

    /// A reset's headers but its media type: what caches may do with it, and its `ETag`.
    private static func resetHeaders(_ caching: FeedCaching, _ version: Version) -> [(name: String, value: String)] {
        caching.headers(.reset) + [("ETag", FeedCaching.resetEntityTag(version))]
    }

    /// Counts a poll or stream from a version of the current epoch older than the kept history, and warns at most
    /// once a minute: clients that fall behind under load reload whole snapshots, which nothing else said.
    func noteCursorBehindHistory(_ subject: FeedSubject, since: Version, current: Version) {
        guard since.epoch == current.epoch, since.seq < current.seq else { return }
        metrics.cursorBehindHistory()
        guard historyWarning.allows() else { return }
        logger.warning(
            "a client of \(subject.kind.rawValue) \(subject.name) came from version \(since), older than the history "
                + "it keeps (it is at \(current); --history \(config.history) versions, --history-bytes "
                + "\(config.historyBytes)): it reloads a snapshot; if clients fall behind so under load, raise them "
                + "(logged at most once a minute; changeserver_cursors_behind_history_total counts each)")
    }

    /// The empty answer of a poll that does not wait: at `since`, with the next cursor so that the URL it names
    /// was never answered before.
    private func emptyAnswer(
        _ subject: FeedSubject, _ since: Version, _ timeout: Int, _ cursor: Int64?, _ caching: FeedCaching
    ) -> Response {
        let nextCursor = FeedCaching.nextCursor(after: cursor, timeout: timeout)
        let headers =
            caching.headers(.empty) + [("ETag", FeedCaching.entityTag(from: since, to: since, cursor: nextCursor))]
        let next = FeedCaching.next(at: since, timeout: timeout, cursor: nextCursor)
        let empty = Changeset(from: since, to: since)
        return .json(.ok, headers: headers) {
            $0.feedChanges(subject.kind, name: subject.name, changeset: empty, next: next)
        }
    }

    /// How feed answers are marked for caches: shared unless reads need a token.
    var feedCaching: FeedCaching { FeedCaching(isShared: config.readToken == nil) }

    static func badSince(_ raw: String) -> HTTPError {
        .badRequest("since must be a version \"<epoch>.<seq>\" as the server writes it, not '\(raw)'.")
    }

    func pollTimeout(_ request: Request) throws(HTTPError) -> Int {
        guard let raw = request.rawQuery("timeout") else { return Self.defaultPollTimeout }
        guard let text = percentDecoded(Substring(raw)), !text.isEmpty,
            text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else {
            throw .badRequest(
                "timeout must be a non-negative integer of seconds, not '\(raw)'.")
        }
        return Int(text).map { min($0, Self.maximumPollTimeout) } ?? Self.maximumPollTimeout
    }

    /// The optional `cursor` of a `next` query string: a non-negative integer up to `FeedCaching.maximumCursor`.
    private func pollCursor(_ request: Request) throws(HTTPError) -> Int64? {
        guard let raw = request.rawQuery("cursor") else { return nil }
        guard let text = percentDecoded(Substring(raw)), !text.isEmpty, text.utf8.count <= 16,
            text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int64(text),
            value <= FeedCaching.maximumCursor
        else {
            throw .badRequest("cursor must be an integer from 0 to \(FeedCaching.maximumCursor), not '\(raw)'.")
        }
        return value
    }
}
