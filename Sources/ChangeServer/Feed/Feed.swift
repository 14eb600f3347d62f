import Model

/// The long polls one worker holds right now, and their fan-out. Each worker (event loop) has its own feed, and
/// everything here runs on that worker's loop thread; a commit reaches every worker's feed as a posted task.
///
/// When a collection commits, its waiters are grouped by the version they wait from (and the CORS headers their
/// responses carry): each group's changeset is computed and encoded once, into one MHD response queued on every
/// connection of the group.
final class Feed {
    /// A class: a fan-out passes each waiter around several times, and copying one reference costs less than
    /// copying the exchange, the subject and the version.
    private final class Waiter {
        let exchange: Exchange
        let subject: FeedSubject
        let since: Version
        let timeout: Int
        /// The request's `cursor`, from which an empty answer's `next` is made.
        let cursor: Int64?
        let bucket: Int64

        init(exchange: Exchange, subject: FeedSubject, since: Version, timeout: Int, cursor: Int64?, bucket: Int64) {
            self.exchange = exchange
            self.subject = subject
            self.since = since
            self.timeout = timeout
            self.cursor = cursor
            self.bucket = bucket
        }

        func isAhead(of current: Version) -> Bool { Feed.isAhead(since, of: current) }
    }

    /// A cursor from a server sharing this one's database that has applied more records than this one yet (only
    /// held with `--postgres`): it waits until this server catches up past it.
    private static func isAhead(_ since: Version, of current: Version) -> Bool {
        since.epoch == current.epoch && since.seq > current.seq
    }

    /// What a group of waiters is answered with.
    private enum Outcome {
        case changes(Changeset)
        /// A changeset encoded already, where it committed.
        case encoded(EncodedChangeset)
        case error(HTTPError)
    }

    /// Deadlines are kept in buckets of this many milliseconds, so that thousands of polls held with the same
    /// timeout expire together and removing an answered poll costs O(1).
    private static let bucketMilliseconds: Int64 = 100

    private var waiters: [ObjectIdentifier: Waiter] = [:]
    private var bySubject: [ObjectIdentifier: Set<ObjectIdentifier>] = [:]
    private var buckets: [Int64: Set<ObjectIdentifier>] = [:]
    /// The keys of `buckets`, sorted.
    private var bucketOrder: [Int64] = []
    /// Jitter needs no cryptographic randomness: a seeded generator spares a system call per held poll.
    private var jitterSource = SplitMix64(seed: UInt64.random(in: 0...UInt64.max))
    private let metrics: Metrics
    private let caching: FeedCaching
    private let respond: ([Exchange], SharedResponse) -> Void

    /// `respond` answers held exchanges with one response (`HTTPServer.answer`).
    init(metrics: Metrics, caching: FeedCaching, respond: @escaping ([Exchange], SharedResponse) -> Void) {
        self.metrics = metrics
        self.caching = caching
        self.respond = respond
    }

    /// Holds `exchange` until `subject` moves past `since` or `timeout` seconds pass, plus a little random extra
    /// time (up to a tenth, at most a second) so that polls held with the same timeout do not all end together.
    ///
    /// The poll is counted among the subject's followers before its version is read again: a commit that came
    /// after the route's read and before the count was not posted here (`Followers`), so a poll that finds the
    /// subject moved is due at once and answered on the loop's next turn, once libmicrohttpd has suspended it.
    func hold(_ exchange: Exchange, on subject: FeedSubject, since: Version, timeout: Int, cursor: Int64?) {
        subject.followers.join()
        let now = MonotonicClock.now()
        let current = subject.version
        let movedMeanwhile = current != since && !Self.isAhead(since, of: current)
        let milliseconds = Int64(timeout) * 1000
        let jitter = Int64.random(in: 0...min(1000, milliseconds / 10), using: &jitterSource)
        let deadline = now + milliseconds + jitter
        let bucket =
            movedMeanwhile
            ? now / Self.bucketMilliseconds : (deadline + Self.bucketMilliseconds - 1) / Self.bucketMilliseconds
        let id = ObjectIdentifier(exchange)
        waiters[id] = Waiter(
            exchange: exchange, subject: subject, since: since, timeout: timeout, cursor: cursor, bucket: bucket)
        bySubject[ObjectIdentifier(subject), default: []].insert(id)
        if buckets[bucket] == nil {
            let position = bucketOrder.partitioningIndex { $0 >= bucket }
            bucketOrder.insert(bucket, at: position)
        }
        buckets[bucket, default: []].insert(id)
        metrics.adjustHeldPolls(by: 1)
    }

    /// `subject` committed `changes`: answers its waiters that are behind it. Those at the changeset's `from` get
    /// its encoded bytes as they are; others (a poll that came in between two commits) get their own coalesced
    /// changeset.
    func committed(_ subject: FeedSubject, _ changes: EncodedChangeset) {
        guard let ids = bySubject[ObjectIdentifier(subject)] else { return }
        let current = subject.version
        let exact = changes.changeset.to == current
        var direct: [Waiter] = []
        var others: [Waiter] = []
        direct.reserveCapacity(ids.count)
        for id in ids {
            guard let waiter = waiters[id], waiter.since != current, !waiter.isAhead(of: current) else { continue }
            if exact && waiter.since == changes.changeset.from {
                direct.append(waiter)
            } else {
                others.append(waiter)
            }
        }
        // Usually every poll on the subject is answered: its set goes at once rather than poll by poll.
        if direct.count + others.count == ids.count { bySubject[ObjectIdentifier(subject)] = nil }
        answer(direct, with: .encoded(changes))
        answer(others)
    }

    /// `subject` was deleted: its waiters get `410 collection_deleted`.
    func deleted(_ subject: FeedSubject) {
        guard let ids = bySubject[ObjectIdentifier(subject)] else { return }
        answer(ids.compactMap { waiters[$0] }, with: .error(.deleted(subject.kind, subject.name)))
    }

    /// The client of a held poll hung up: the poll is let go without an answer. False if it is not held here.
    func drop(_ exchange: Exchange) -> Bool {
        guard let waiter = waiters[ObjectIdentifier(exchange)] else { return false }
        remove(waiter)
        metrics.adjustHeldPolls(by: -1)
        return true
    }

    /// The server is shutting down: every waiter gets `503` with `Retry-After`.
    func shutDown() {
        answer(Array(waiters.values), with: .error(.shuttingDown))
    }

    /// The earliest deadline among the held polls.
    var nextDeadline: Int64? {
        bucketOrder.first.map { $0 * Self.bucketMilliseconds }
    }

    /// Answers the polls whose deadline has passed: with the empty changeset, or with what committed meanwhile.
    func expire(now: Int64) {
        var due: [Waiter] = []
        while let first = bucketOrder.first, first * Self.bucketMilliseconds <= now {
            bucketOrder.removeFirst()
            for id in buckets.removeValue(forKey: first) ?? [] {
                // A bucket keeps the polls answered since (see `remove`): only those still held in it are due.
                if let waiter = waiters[id], waiter.bucket == first { due.append(waiter) }
            }
        }
        answer(due)
    }

    // MARK: Answering

    /// Answers waiters with what their collection or view holds now since their version.
    private func answer(_ group: [Waiter]) {
        struct Cursor: Hashable {
            var subject: ObjectIdentifier
            var since: Version
        }
        var byCursor: [Cursor: [Waiter]] = [:]
        for waiter in group {
            byCursor[Cursor(subject: ObjectIdentifier(waiter.subject), since: waiter.since), default: []].append(
                waiter)
        }
        for (cursor, waiters) in byCursor {
            guard let subject = waiters.first?.subject else { continue }
            let (current, changeset) = subject.changes(since: cursor.since)
            let since = cursor.since
            if let changeset {
                answer(waiters, with: .changes(changeset))
            } else if let waiter = waiters.first, waiter.isAhead(of: current) {
                answer(waiters, with: .changes(Changeset(from: since, to: since)))
            } else {
                answer(waiters, with: .error(.cursorExpired(since.description, current: current)))
            }
        }
    }

    /// Answers waiters that share an outcome: one encoding per distinct `next` (the waiters' timeouts, and for an
    /// empty answer their cursors), one response per distinct set of CORS headers.
    private func answer(_ group: [Waiter], with outcome: Outcome) {
        guard let first = group.first else { return }
        switch outcome {
        case .changes(let changeset) where changeset.isEmpty: metrics.pollsTimedOut(group.count)
        case .changes, .encoded: metrics.changesetsDelivered(group.count)
        case .error: break
        }
        // Read once, so that the waiters answered together are sent to one next URL.
        let now = FeedCaching.wallClockSeconds()
        // Grouped by what their `next` is made of, then each distinct `next` written once: formatting it for every
        // waiter had cost more than the rest of its answer.
        var byNextKey: [NextKey: [Waiter]] = [:]
        for waiter in group { byNextKey[nextKey(for: waiter, outcome, now: now), default: []].append(waiter) }
        var byNext: [String: [Waiter]] = [:]
        for (key, waiters) in byNextKey { byNext[next(key, outcome), default: []] += waiters }
        let (kind, name) = (first.subject.kind, first.subject.name)
        for (next, waiters) in byNext {
            var body: Response
            switch outcome {
            case .changes(let changeset):
                let cursor = changeset.isEmpty ? waiters.first.map { nextCursor(for: $0, now: now) } : nil
                body = Response.json(
                    .ok,
                    headers: caching.headers(changeset.isEmpty ? .empty : .changes) + [
                        ("ETag", FeedCaching.entityTag(from: changeset.from, to: changeset.to, cursor: cursor))
                    ]
                ) { $0.feedChanges(kind, name: name, changeset: changeset, next: next) }
            case .encoded(let changes):
                body = Response.json(
                    .ok,
                    headers: caching.headers(.changes) + [
                        ("ETag", FeedCaching.entityTag(from: changes.changeset.from, to: changes.changeset.to))
                    ]
                ) { $0.feedChanges(kind, name: name, changes: changes, next: next) }
            case .error(let error):
                body = Response.error(error)
                body.headers += caching.headers(.init(error: error))
            }
            send(body, to: waiters)
        }
        metrics.adjustHeldPolls(by: -group.count)
    }

    /// What the `next` of a waiter's answer is made of besides the outcome: the waiter's timeout, and for an empty
    /// answer its next cursor.
    private struct NextKey: Hashable {
        var timeout: Int
        var cursor: Int64?
    }

    private func nextKey(for waiter: Waiter, _ outcome: Outcome, now: Int64) -> NextKey {
        switch outcome {
        case .changes(let changeset) where changeset.isEmpty:
            NextKey(timeout: waiter.timeout, cursor: nextCursor(for: waiter, now: now))
        case .changes, .encoded: NextKey(timeout: waiter.timeout, cursor: nil)
        case .error: NextKey(timeout: 0, cursor: nil)
        }
    }

    /// The `next` of an answer (empty for an error: errors carry none).
    private func next(_ key: NextKey, _ outcome: Outcome) -> String {
        switch outcome {
        case .changes(let changeset) where changeset.isEmpty:
            FeedCaching.next(at: changeset.to, timeout: key.timeout, cursor: key.cursor ?? 0)
        case .changes(let changeset): FeedCaching.next(to: changeset.to, timeout: key.timeout)
        case .encoded(let changes): FeedCaching.next(to: changes.changeset.to, timeout: key.timeout)
        case .error: ""
        }
    }

    private func nextCursor(for waiter: Waiter, now: Int64) -> Int64 {
        FeedCaching.nextCursor(after: waiter.cursor, timeout: waiter.timeout, now: now)
    }

    /// One response for the waiters without CORS headers, one per distinct set of CORS headers for the others.
    private func send(_ body: Response, to group: [Waiter]) {
        var plain: [Exchange] = []
        plain.reserveCapacity(group.count)
        var withCORS: [String: (response: SharedResponse, exchanges: [Exchange])] = [:]
        for waiter in group {
            let extra = waiter.exchange.extraHeaders
            guard !extra.isEmpty else {
                plain.append(waiter.exchange)
                continue
            }
            let key = extra.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
            if withCORS[key] == nil {
                var withHeaders = body
                withHeaders.addHeaders(extra)
                withCORS[key] = (SharedResponse(withHeaders), [])
            }
            withCORS[key]?.exchanges.append(waiter.exchange)
        }
        // Answered first, forgotten after: the answers go out sooner.
        if !plain.isEmpty { respond(plain, SharedResponse(body)) }
        for (_, answer) in withCORS { respond(answer.exchanges, answer.response) }
        for waiter in group { remove(waiter) }
    }

    /// Forgets a waiter. Its deadline bucket keeps it until the bucket is due (`expire` skips what is no longer
    /// held there): removing 10,000 answered polls from their bucket one by one had cost a tenth of a fan-out, and a
    /// bucket lives no longer than the polls' timeout.
    private func remove(_ waiter: Waiter) {
        let id = ObjectIdentifier(waiter.exchange)
        if waiters.removeValue(forKey: id) != nil { waiter.subject.followers.leave() }
        let subject = ObjectIdentifier(waiter.subject)
        guard var ids = bySubject.removeValue(forKey: subject) else { return }
        ids.remove(id)
        if !ids.isEmpty { bySubject[subject] = ids }
    }
}
