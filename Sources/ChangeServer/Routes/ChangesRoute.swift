import Model

/// `GET /v1/collections/{name}/changes` and `GET /v1/views/{name}/changes` (`?since=<version>&timeout=<seconds>`):
/// the long-poll change feed, the same for a collection and a view.
extension App {
    static let defaultPollTimeout = 25
    static let maximumPollTimeout = 300

    func changes(_ request: Request, _ subject: () throws(HTTPError) -> FeedSubject, _ connection: Connection)
        throws(HTTPError) -> RouteResult
    {
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
        let subject = try subject()
        if sinceIsBeyondAnyVersion { throw .cursorExpired(request.rawQuery("since") ?? "", current: subject.version) }
        guard let since else {
            let snapshot = subject.snapshotJSON()
            let version = snapshot.version
            return .respond(
                feedResponse { writer in
                    writer.object { writer in
                        writer.field(subject.kind.key, subject.name)
                        writer.field("reset") { $0.raw("true") }
                        writer.field("to", version.description)
                        writer.field("snapshot") { $0.raw(snapshot.json) }
                    }
                })
        }
        let (current, changeset) = subject.changes(since: since)
        guard let changeset else {
            // With a shared database, a cursor can come from a server that applied more than this one yet: it is
            // held until this server catches up (at its timeout it gets the empty changeset), never 410.
            guard committer.storeState != nil, since.epoch == current.epoch, since.seq > current.seq else {
                throw .cursorExpired(since.description, current: current)
            }
            guard timeout > 0 else {
                let empty = Changeset(from: since, to: since)
                return .respond(feedResponse { $0.feedChanges(subject.kind, name: subject.name, changeset: empty) })
            }
            guard metrics.heldPolls < config.maxHeldPolls else { throw .tooManyPolls(limit: config.maxHeldPolls) }
            connection.hold(on: subject, since: since, timeout: timeout)
            return .later
        }
        if !changeset.isEmpty || timeout == 0 {
            if !changeset.isEmpty { metrics.changesetsDelivered(1) }
            return .respond(
                feedResponse { $0.feedChanges(subject.kind, name: subject.name, changeset: changeset) })
        }
        guard metrics.heldPolls < config.maxHeldPolls else { throw .tooManyPolls(limit: config.maxHeldPolls) }
        connection.hold(on: subject, since: since, timeout: timeout)
        return .later
    }

    private static func badSince(_ raw: String) -> HTTPError {
        .badRequest("since must be a version \"<epoch>.<seq>\", not '\(raw)'.")
    }

    /// `<epoch>.<digits>`, whatever the number of digits.
    private static func hasVersionForm(_ text: String) -> Bool {
        guard let dot = text.lastIndex(of: ".") else { return false }
        let digits = text[text.index(after: dot)...]
        return Version.isValidEpoch(String(text[..<dot])) && !digits.isEmpty
            && digits.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    private func pollTimeout(_ request: Request) throws(HTTPError) -> Int {
        guard let raw = request.rawQuery("timeout") else { return Self.defaultPollTimeout }
        guard !raw.isEmpty, raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw .badRequest(
                "timeout must be a non-negative integer of seconds, not '\(raw)'.")
        }
        return Int(raw).map { min($0, Self.maximumPollTimeout) } ?? Self.maximumPollTimeout
    }

    private func feedResponse(_ write: (inout JSONWriter) -> Void) -> Response {
        .json(.ok, headers: [("Cache-Control", "no-store")], write)
    }
}
