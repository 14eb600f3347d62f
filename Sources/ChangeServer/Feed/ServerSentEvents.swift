import Model

/// The change feed as Server-Sent Events (API.md, "Stream"): how events are written, and what a stream starts
/// with. The data of each event is the JSON a poll would be answered with.
enum ServerSentEvents {
    /// The response headers of a stream, never stored (`FeedCaching.Kind.notStored`), and varying with `Accept` as
    /// every answer of its URL does. `X-Accel-Buffering: no` tells nginx not to buffer it, whatever its
    /// configuration says.
    static func headers(_ caching: FeedCaching) -> [(name: String, value: String)] {
        [("Content-Type", "text/event-stream; charset=utf-8")] + caching.headers(.notStored) + [
            ("X-Accel-Buffering", "no")
        ]
    }

    /// How long a browser waits before it reconnects a stream, in milliseconds: drawn per stream from this range,
    /// so that the streams a stop or a network fault cuts all at once do not all come back in the same instant.
    static let retryMilliseconds = 1000...3000

    /// What a stream sends first: a comment (so that headers and the first bytes go out through any proxy), and
    /// how long a browser waits before it reconnects (`retry`, drawn from `retryMilliseconds`).
    static func opening<Generator: RandomNumberGenerator>(using generator: inout Generator) -> [UInt8] {
        Array(": changeserver stream\nretry: \(Int.random(in: retryMilliseconds, using: &generator))\n\n".utf8)
    }

    /// The comment sent every `heartbeatMilliseconds` on every stream, so that proxies keep idle streams open and
    /// the server notices clients that left.
    static let heartbeat = Array(": heartbeat\n\n".utf8)
    static let heartbeatMilliseconds: Int64 = 15_000

    /// `event: <name>`, an optional `id: <id>`, `data: <json>`, and the blank line that ends the event. JSON
    /// never holds a raw line break inside a string, so line breaks between its tokens become spaces and the data
    /// stays on one line.
    ///
    /// - Complexity: O(n) in the size of `json`.
    static func event(_ name: String, id: String?, json: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(json.count + name.utf8.count + (id?.utf8.count ?? 0) + 24)
        bytes += "event: \(name)\n".utf8
        if let id { bytes += "id: \(id)\n".utf8 }
        bytes += "data: ".utf8
        bytes += json.lazy.map { $0 == 0x0A || $0 == 0x0D ? 0x20 : $0 }
        bytes += "\n\n".utf8
        return bytes
    }

    /// `event: changes` with `id: <to>`: a changeset, as a poll answers it.
    static func changes(_ kind: FeedSubjectKind, name: String, changeset: Changeset) -> [UInt8] {
        var writer = JSONWriter()
        writer.feedChanges(kind, name: name, changeset: changeset, next: next(changeset.to))
        return event("changes", id: changeset.to.description, json: writer.bytes)
    }

    /// `event: changes` around a changeset encoded already where it committed.
    static func changes(_ kind: FeedSubjectKind, name: String, encoded: EncodedChangeset) -> [UInt8] {
        var writer = JSONWriter()
        writer.feedChanges(kind, name: name, changes: encoded, next: next(encoded.changeset.to))
        return event("changes", id: encoded.changeset.to.description, json: writer.bytes)
    }

    /// `event: gone` with an error body (`cursor_expired`, `collection_deleted`); the stream ends after it.
    static func gone(_ error: HTTPError) -> [UInt8] {
        event("gone", id: nil, json: Response.error(error).body)
    }

    /// A stream's events carry the `next` a poll at the default timeout would: a client that falls back to
    /// polling continues from it.
    private static func next(_ version: Version) -> String {
        FeedCaching.next(to: version, timeout: App.defaultPollTimeout)
    }
}

/// The `event: reset` a stream opened without a version starts with (the snapshot, as a poll's reset has it), shared
/// by every stream opened at its version while one of them still holds it (`SnapshotCache.sharedStreamReset`): the
/// streams of a large collection that reconnect together hold one copy of it, not one each.
final class StreamReset: Sendable {
    let version: Version
    let bytes: [UInt8]

    private init(version: Version, bytes: [UInt8]) {
        self.version = version
        self.bytes = bytes
    }

    /// The reset to `subject`'s current version: the one streams hold, or a new one, shared from now on.
    /// - Complexity: O(n) in the snapshot's size when it is not shared already.
    static func current(of subject: FeedSubject) -> StreamReset {
        if let shared = subject.encodedSnapshot.sharedStreamReset(at: subject.version) { return shared }
        let generation = subject.encodedSnapshot.generation
        let snapshot = subject.snapshotJSON()
        let version = snapshot.version
        var writer = JSONWriter()
        writer.feedReset(
            subject.kind, name: subject.name, to: version,
            next: FeedCaching.next(to: version, timeout: App.defaultPollTimeout), snapshot: snapshot.json)
        let reset = StreamReset(
            version: version, bytes: ServerSentEvents.event("reset", id: version.description, json: writer.bytes))
        subject.encodedSnapshot.shareStreamReset(reset, writtenAt: generation)
        return reset
    }
}

/// What a stream route hands to its event loop: the collection or view, the version the stream is at once its first
/// bytes are sent (`initial`, then the shared `reset` when there is one), and whether the stream ends after them
/// (`event: gone`).
struct StreamStart: Sendable {
    let subject: FeedSubject
    let version: Version
    let initial: [UInt8]
    var reset: StreamReset? = nil
    let ends: Bool

    /// Everything the stream starts with.
    var bytes: [UInt8] { initial + (reset?.bytes ?? []) }
}
