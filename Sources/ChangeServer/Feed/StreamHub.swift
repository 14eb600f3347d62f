import Model

/// The event streams one worker holds, and their fan-out: the streaming counterpart of `Feed`. Everything here
/// runs on that worker's loop thread.
///
/// When a collection commits, the streams at the changeset's `from` get one event encoded once and shared by all
/// of them (its bytes are not copied per stream); a stream at another version behind (it opened between two
/// commits) gets its own coalesced changeset, encoded once per version. A stream whose cursor left the kept
/// history, or whose collection is deleted, gets `event: gone` and ends.
final class StreamHub {
    private struct Member {
        let stream: EventStream
        let subject: FeedSubject
        var version: Version
    }

    private var members: [ObjectIdentifier: Member] = [:]
    private var bySubject: [ObjectIdentifier: Set<ObjectIdentifier>] = [:]
    private var nextHeartbeat: Int64?
    /// Streams, open or ended, with bytes written past libmicrohttpd that their client has not taken: each is cut
    /// when its client takes none of them for `stallMilliseconds` (libmicrohttpd never times out a suspended
    /// connection), so a client that stops reading holds neither its connection nor its bytes for long.
    private var backlogged: [ObjectIdentifier: EventStream] = [:]
    /// When the server began shutting down: backlogged streams are then cut `shutdownDrainMilliseconds` later at the
    /// latest, within the server's grace period (libmicrohttpd must not be stopped with a connection suspended).
    private var shutdownStarted: Int64?
    /// Streams opened behind a commit that was not posted to them (`open`), caught up at the next `tick`.
    private var openedBehind: Set<ObjectIdentifier> = []
    private let metrics: Metrics

    static let stallMilliseconds: Int64 = 30_000
    static let shutdownDrainMilliseconds: Int64 = 2_000
    private static let heartbeat = StreamEvent(ServerSentEvents.heartbeat)

    init(metrics: Metrics) {
        self.metrics = metrics
    }

    var count: Int { members.count }

    /// Starts a stream: sends `start.initial`, and either ends it (`start.ends`) or follows `start.subject` from
    /// `start.version`. The stream is counted among the subject's followers before its version is read again: a
    /// commit that came after the route's read and before the count was not posted here (`Followers`), so it is
    /// sent on the loop's next turn (`tick`): this runs inside libmicrohttpd's callback, where a stream that a large
    /// catch-up would overflow must not be cut.
    func open(_ stream: EventStream, _ start: StreamStart) {
        stream.start([start.initial] + (start.reset.map { [$0.bytes] } ?? []), holding: start.reset)
        if start.ends {
            stream.end()
            return
        }
        let id = ObjectIdentifier(stream)
        members[id] = Member(stream: stream, subject: start.subject, version: start.version)
        bySubject[ObjectIdentifier(start.subject), default: []].insert(id)
        start.subject.followers.join()
        metrics.adjustOpenStreams(by: 1)
        if nextHeartbeat == nil { nextHeartbeat = MonotonicClock.now() + ServerSentEvents.heartbeatMilliseconds }
        stream.onClose = { [unowned self] stream in self.remove(ObjectIdentifier(stream)) }
        if start.subject.version != start.version { openedBehind.insert(id) }
    }

    /// `subject` committed `changes`: every stream behind it gets its event.
    func committed(_ subject: FeedSubject, _ changes: EncodedChangeset) {
        guard let ids = bySubject[ObjectIdentifier(subject)] else { return }
        let (current, kind, name) = (subject.version, subject.kind, subject.name)
        var shared: StreamEvent?
        var byVersion: [Version: [ObjectIdentifier]] = [:]
        var delivered = 0
        for id in ids {
            guard let member = members[id], member.version != current, !Self.isAhead(member.version, of: current)
            else { continue }
            if member.version == changes.changeset.from && changes.changeset.to == current {
                let event = shared ?? StreamEvent(ServerSentEvents.changes(kind, name: name, encoded: changes))
                shared = event
                if deliver(event, to: id, at: current) { delivered += 1 }
            } else {
                byVersion[member.version, default: []].append(id)
            }
        }
        for (version, group) in byVersion { delivered += catchUp(group, from: version, on: subject) }
        if delivered > 0 { metrics.changesetsDelivered(delivered) }
    }

    /// Sends the streams opened behind a commit (`open`) what they missed, unless a posted commit did meanwhile.
    private func catchUpOpenedBehind() {
        var delivered = 0
        for id in openedBehind {
            guard let member = members[id], member.version != member.subject.version,
                !Self.isAhead(member.version, of: member.subject.version)
            else { continue }
            delivered += catchUp([id], from: member.version, on: member.subject)
        }
        openedBehind.removeAll()
        if delivered > 0 { metrics.changesetsDelivered(delivered) }
    }

    /// Whether a stream's version is ahead of its subject's: a cursor from a server that shares the database and
    /// applied more than this one yet. The stream waits for this server to catch up, as a held poll does.
    private static func isAhead(_ version: Version, of current: Version) -> Bool {
        version.epoch == current.epoch && version.seq > current.seq
    }

    /// Sends the streams of `group`, all at `version`, one event with what `subject` committed since, encoded once;
    /// or `gone` when that version left the kept history. Returns how many streams took the event.
    private func catchUp(_ group: [ObjectIdentifier], from version: Version, on subject: FeedSubject) -> Int {
        let (current, changeset) = subject.changes(since: version)
        guard let changeset else {
            let event = StreamEvent(ServerSentEvents.gone(.cursorExpired(version.description, current: current)))
            for id in group { end(id, with: event) }
            return 0
        }
        let event = StreamEvent(ServerSentEvents.changes(subject.kind, name: subject.name, changeset: changeset))
        var delivered = 0
        for id in group where deliver(event, to: id, at: changeset.to) { delivered += 1 }
        return delivered
    }

    /// `subject` was deleted: its streams get `event: gone` (`collection_deleted`) and end.
    func deleted(_ subject: FeedSubject) {
        guard let ids = bySubject[ObjectIdentifier(subject)] else { return }
        let event = StreamEvent(ServerSentEvents.gone(.deleted(subject.kind, subject.name)))
        for id in ids { end(id, with: event) }
    }

    /// The server is shutting down: every stream sends what it has queued and ends cleanly; clients reconnect
    /// (to another server) with their `Last-Event-ID`.
    func shutDown() {
        shutdownStarted = MonotonicClock.now()
        for id in Array(members.keys) { end(id, with: nil) }
        nextHeartbeat = nil
    }

    /// When the next heartbeat is due, while streams are open, or the next backlogged stream would be cut; at once
    /// when a stream opened behind waits for its catch-up.
    var nextDeadline: Int64? {
        if !openedBehind.isEmpty { return 0 }
        let heartbeat = members.isEmpty ? nil : nextHeartbeat
        guard let stalled = backlogged.values.lazy.compactMap(\.stalledSince).min() else { return heartbeat }
        let cut = cutTime(stalledSince: stalled)
        return min(heartbeat ?? cut, cut)
    }

    /// Sends the heartbeat comment on every stream when it is due; cuts streams whose client stopped taking their
    /// bytes.
    func tick(now: Int64) {
        if !openedBehind.isEmpty { catchUpOpenedBehind() }
        if !backlogged.isEmpty { cutStalled(now: now) }
        guard let due = nextHeartbeat, now >= due else { return }
        nextHeartbeat = members.isEmpty ? nil : now + ServerSentEvents.heartbeatMilliseconds
        for (id, member) in members where !member.stream.send(Self.heartbeat) { cutOff(id) }
    }

    // MARK: Members

    /// Whether the stream took the event (one that did not is cut off).
    private func deliver(_ event: StreamEvent, to id: ObjectIdentifier, at version: Version) -> Bool {
        guard let stream = members[id]?.stream else { return false }
        guard stream.send(event) else {
            cutOff(id)
            return false
        }
        members[id]?.version = version
        if stream.hasUnsentBytes { backlogged[id] = stream }
        return true
    }

    /// A stream that took no more (its reader fell behind past the bound, or its client is gone): it is closed and
    /// forgotten.
    private func cutOff(_ id: ObjectIdentifier) {
        guard let member = members[id] else { return }
        member.stream.cut()
        if !member.stream.clientIsGone { metrics.streamCut() }
        remove(id)
    }

    private func end(_ id: ObjectIdentifier, with event: StreamEvent?) {
        guard let member = members[id] else { return }
        if let event { member.stream.send(event) }
        member.stream.end()
        if member.stream.hasUnsentBytes { backlogged[id] = member.stream }
        remove(id)
    }

    /// Cuts the backlogged streams whose client took nothing for too long; forgets those that caught up.
    private func cutStalled(now: Int64) {
        for (id, stream) in backlogged {
            guard let since = stream.stalledSince else {
                backlogged[id] = nil
                continue
            }
            guard now >= cutTime(stalledSince: since) else { continue }
            backlogged[id] = nil
            if members[id] != nil {
                cutOff(id)
            } else {
                stream.cut()
                metrics.streamCut()
            }
        }
    }

    private func cutTime(stalledSince since: Int64) -> Int64 {
        let stalled = since + Self.stallMilliseconds
        guard let shutdownStarted else { return stalled }
        return min(stalled, shutdownStarted + Self.shutdownDrainMilliseconds)
    }

    private func remove(_ id: ObjectIdentifier) {
        guard let member = members.removeValue(forKey: id) else { return }
        member.subject.followers.leave()
        member.stream.onClose = nil
        let collection = ObjectIdentifier(member.subject)
        bySubject[collection]?.remove(id)
        if bySubject[collection]?.isEmpty == true { bySubject[collection] = nil }
        metrics.adjustOpenStreams(by: -1)
    }
}
