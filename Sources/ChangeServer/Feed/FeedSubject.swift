import Model
import Synchronization

/// What a change feed follows: a collection or a view. The feed holds polls on it, asks it for changesets, and
/// names it in its answers (`"collection"` or `"view"`).
protocol FeedSubject: AnyObject, Sendable {
    var name: String { get }
    /// The key that names the subject in feed answers and snapshots.
    var kind: FeedSubjectKind { get }
    var version: Version { get }
    /// The current version, and ONE changeset from `since` to it (nil when `since` is not in the kept history).
    func changes(since: Version) -> (current: Version, changeset: Changeset?)
    /// Writes the snapshot body (`{"collection"|"view", "version", …, "sections"}`); returns its version.
    func writeSnapshot(into writer: inout JSONWriter) -> Version
    /// Where the snapshot's JSON is kept between reads.
    var encodedSnapshot: SnapshotCache { get }
    /// The items its snapshot shows, and the bytes of their ids and data and of its sections': what encoding the
    /// snapshot costs.
    var size: (items: Int, bytes: Int) { get }
    /// The held polls and open streams that follow the subject, on every loop.
    var followers: Followers { get }
}

/// A snapshot's JSON and the version it shows, with the answers to a read of it, shared by every read of that
/// version (`ResponseShare`).
final class EncodedSnapshot: Sendable {
    let version: Version
    let json: [UInt8]
    /// `200` with the snapshot and its `ETag`.
    let read: Response
    /// `304` for a read whose `If-None-Match` names this version.
    let notModified: Response

    init(version: Version, json: [UInt8]) {
        self.version = version
        self.json = json
        read = .snapshot(json, at: version)
        notModified = .snapshotNotModified(answering: read)
    }

    /// Snapshots up to this size are kept encoded, one per collection or view (at most this much memory each);
    /// larger ones are encoded for each read, which costs little next to sending them.
    static let cachedLimit = 1 << 20
}

extension FeedSubject {
    /// The snapshot's JSON at the current version: encoded once per version and shared by every read of it, so
    /// that reading an unchanged collection costs about what serving a static body costs.
    func snapshotJSON() -> EncodedSnapshot {
        let current = version
        if let cached = cachedSnapshot(at: current) { return cached }
        let generation = encodedSnapshot.generation
        var writer = JSONWriter()
        let written = writeSnapshot(into: &writer)
        let encoded = EncodedSnapshot(version: written, json: writer.bytes)
        encodedSnapshot.keep(encoded, writtenAt: generation)
        return encoded
    }

    /// The snapshot of `version` if it is the one kept encoded.
    func cachedSnapshot(at version: Version) -> EncodedSnapshot? {
        encodedSnapshot.snapshot(at: version)
    }

    /// A read of the subject: `304` when `If-None-Match` names its version, else the snapshot. The `304` says the
    /// snapshot's length (`Response.notModified(answering:)`): a version not encoded yet is encoded for it, once.
    /// A snapshot too large to be kept is sent from memory counted against `budget` (`ResponseBytes`), shared by
    /// the reads of its version while any of them is being sent: a thousand clients reading it at once hold one
    /// copy, not a thousand. When the budget has no room, the snapshot goes on as it is, and the HTTP layer, which
    /// counts every large answer to a `GET`, refuses it `503` (a `HEAD`'s is sent: it has no body to hold).
    func read(_ request: Request, budget: MemoryBudget) -> Response {
        if let answer = readWithoutEncoding(request) { return answer }
        let tags = request.listHeader("If-None-Match").map(EntityTags.init)
        let generation = encodedSnapshot.generation
        let snapshot = snapshotJSON()
        if tags?.matches(snapshot.version, weakly: true) == true { return snapshot.notModified }
        guard snapshot.json.count > EncodedSnapshot.cachedLimit,
            let body = ResponseBytes(copying: snapshot.json, budget: budget)
        else { return snapshot.read }
        encodedSnapshot.shareLargeBody(body, at: snapshot.version, writtenAt: generation)
        return .snapshot(sharing: body, at: snapshot.version)
    }
}

extension FeedSubject {
    /// Whether the snapshot is one whose encoding takes long enough to hold up an event loop's other requests
    /// (`largeReadItems` items or more, or `largeReadBytes` of content), and it is not kept encoded: a read that
    /// needs it encodes it off the loop (`App.answerRead`). An 86 MB snapshot took 0.4 s to encode, and `/healthz`
    /// on the same loop waited as long.
    var encodingIsSlow: Bool {
        let size = size
        return (size.items >= Self.largeReadItems || size.bytes >= Self.largeReadBytes)
            && cachedSnapshot(at: version) == nil
    }

    /// 10,000 items encode in a few milliseconds.
    static var largeReadItems: Int { 10_000 }
    /// A megabyte of content encodes in about 5 ms (an 86 MB snapshot took 0.4 s); a snapshot of more is never kept
    /// encoded (`EncodedSnapshot.cachedLimit`), so every read of it would hold its loop as long.
    static var largeReadBytes: Int { EncodedSnapshot.cachedLimit }

    /// A read answered from what is kept (a `304`, the snapshot kept encoded, or the body of a large one still being
    /// sent); nil when its snapshot must be encoded.
    func readWithoutEncoding(_ request: Request) -> Response? {
        let tags = request.listHeader("If-None-Match").map(EntityTags.init)
        let current = version
        let namesCurrent = tags?.matches(current, weakly: true) == true
        if namesCurrent, let notModified = encodedSnapshot.notModified(at: current) { return notModified }
        if !namesCurrent, let body = encodedSnapshot.sharedLargeBody(at: current) {
            return .snapshot(sharing: body, at: current)
        }
        guard let cached = cachedSnapshot(at: current) else { return nil }
        return namesCurrent ? cached.notModified : cached.read
    }
}

enum FeedSubjectKind: String, Sendable {
    case collection
    case view

    /// The field that names the subject in JSON bodies.
    var key: StaticString {
        switch self {
        case .collection: "collection"
        case .view: "view"
        }
    }
}

extension CollectionEntry: FeedSubject {
    var kind: FeedSubjectKind { .collection }

    var version: Version { content.withLock { $0.version } }

    var size: (items: Int, bytes: Int) { content.withLock { ($0.itemCount, $0.contentBytes) } }

    func changes(since: Version) -> (current: Version, changeset: Changeset?) {
        content.withLock { ($0.version, $0.changes(since: since)) }
    }

    func writeSnapshot(into writer: inout JSONWriter) -> Version {
        let (version, sections) = content.withLock { ($0.version, $0.snapshot()) }
        writer.snapshot(collection: name, version: version, sections: sections)
        return version
    }
}

extension ViewEntry: FeedSubject {
    var kind: FeedSubjectKind { .view }

    var version: Version { live.withLock { $0.version } }

    var size: (items: Int, bytes: Int) { live.withLock { ($0.itemCount, $0.contentBytes) } }

    func changes(since: Version) -> (current: Version, changeset: Changeset?) {
        live.withLock { ($0.version, $0.changes(since: since)) }
    }

    func writeSnapshot(into writer: inout JSONWriter) -> Version {
        let (version, definition, sections) = live.withLock { ($0.version, $0.definition, $0.snapshot()) }
        writer.viewSnapshot(view: name, version: version, definition: definition, sections: sections)
        return version
    }
}
