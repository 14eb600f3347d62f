import Model

/// `GET /v1/collections/{name}/changes?since=<version>&timeout=<seconds>`: the long-poll change feed.
extension App {
    static let defaultPollTimeout = 25
    static let maximumPollTimeout = 300

    func changes(_ exchange: Exchange, _ name: String, _ worker: Worker) throws(HTTPError) -> HandlerResult {
        let timeout = try pollTimeout(exchange)
        var since: Version?
        /// A cursor of the right form whose sequence number does not even fit in 64 bits: ahead of any version.
        var sinceIsBeyondAnyVersion = false
        if let raw = exchange.rawQuery("since") {
            guard let text = percentDecoded(Substring(raw)) else { throw Self.badSince(raw) }
            if let version = Version(text) {
                since = version
            } else if Self.hasVersionForm(text) {
                sinceIsBeyondAnyVersion = true
            } else {
                throw Self.badSince(raw)
            }
        }
        let entry = try existing(name)
        if sinceIsBeyondAnyVersion {
            let current = entry.content.withLock { $0.version }
            throw Self.cursorExpired(exchange.rawQuery("since") ?? "", current: current)
        }
        guard let since else {
            let (version, sections) = entry.content.withLock { ($0.version, $0.snapshot()) }
            return .respond(
                feedResponse { writer in
                    writer.object { writer in
                        writer.field("collection", name)
                        writer.field("reset") { $0.raw("true") }
                        writer.field("to", version.description)
                        writer.field("snapshot") { $0.snapshot(collection: name, version: version, sections: sections) }
                    }
                })
        }
        let (current, changeset) = entry.content.withLock { ($0.version, $0.changes(since: since)) }
        guard let changeset else { throw Self.cursorExpired(since.description, current: current) }
        if !changeset.isEmpty || timeout == 0 {
            if !changeset.isEmpty { metrics.changesetsDelivered(1) }
            return .respond(feedResponse { $0.feedChanges(collection: name, changeset: changeset) })
        }
        guard metrics.heldPolls < config.maxHeldPolls else {
            throw HTTPError(
                .tooManyRequests, code: "too_many_polls",
                "The server holds \(config.maxHeldPolls) polls already (--max-held-polls); retry shortly."
            ).with(header: "Retry-After", "1")
        }
        worker.feed.hold(exchange, on: entry, since: since, timeout: timeout)
        return .hold
    }

    private static func cursorExpired(_ since: String, current: Version) -> HTTPError {
        HTTPError(
            .gone, code: "cursor_expired",
            "Version \(since) is not in this collection's history (too old, of another epoch, or ahead); "
                + "fetch the snapshot again.", current: current.description)
    }

    private static func badSince(_ raw: String) -> HTTPError {
        HTTPError(.badRequest, code: "bad_request", "since must be a version \"<epoch>.<seq>\", not '\(raw)'.")
    }

    /// `<epoch>.<digits>`, whatever the number of digits.
    private static func hasVersionForm(_ text: String) -> Bool {
        guard let dot = text.lastIndex(of: ".") else { return false }
        let digits = text[text.index(after: dot)...]
        return Version.isValidEpoch(String(text[..<dot])) && !digits.isEmpty
            && digits.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    private func pollTimeout(_ exchange: Exchange) throws(HTTPError) -> Int {
        guard let raw = exchange.rawQuery("timeout") else { return Self.defaultPollTimeout }
        guard !raw.isEmpty, raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw HTTPError(
                .badRequest, code: "bad_request", "timeout must be a non-negative integer of seconds, not '\(raw)'.")
        }
        return Int(raw).map { min($0, Self.maximumPollTimeout) } ?? Self.maximumPollTimeout
    }

    private func feedResponse(_ write: (inout JSONWriter) -> Void) -> Response {
        .json(.ok, headers: [("Cache-Control", "no-store")], write)
    }
}
