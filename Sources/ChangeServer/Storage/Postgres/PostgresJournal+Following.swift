import Dispatch
import Glibc
import Model
import Synchronization

/// Following: the follower thread reads the records of other servers, on notifications and every
/// `catchUpInterval`, and hands them to `SequencedDelivery`.
extension PostgresJournal {
    func wakeFollower() {
        var byte: UInt8 = 1
        _ = write(followerWake.write, &byte, 1)
    }

    func followLoop() {
        var connection: PGConnection?
        /// Whether the follower had a connection and lost it: the next one made counts as a reconnection.
        var lost = false
        /// Whether the writer was told to check its connection since the loss (once is enough).
        var toldWriter = false
        var backoff = Backoff()
        var connectFailures = RepeatedFailure()
        var lastCatchUp: Int64 = 0
        /// Whether a read stopped before a view's record that waits for a record held here (`Followed.blocked`):
        /// every collection is read again in a moment, 2 ms after the first such read, then twice as long after
        /// each next one, up to 64 ms (a catch-up reads every collection's `last_seq`).
        var readSoon = false
        var blockedWait: Int64 = 2
        while !queue.withLock({ $0.isClosing }) {
            guard let current = connection else {
                do throws(StorageError) {
                    let fresh = try PGConnection(url, role: "follower")
                    watchRoundTrips(of: fresh)
                    try fresh.execute("LISTEN " + PostgresSchema.channel)
                    readSoon = try catchUp(fresh)
                    if queue.withLock({ _ in metrics.setFollowerStalled(false) }) {
                        logger.log(.notice, "the PostgreSQL follower reads again: mutations are accepted")
                    }
                    connection = fresh
                    if lost { metrics.reconnected() }
                    lost = false
                    toldWriter = false
                    lastCatchUp = MonotonicClock.now()
                    backoff.reset()
                    connectFailures.reset()
                } catch {
                    if connectFailures.isNewReason(error) {
                        logger.warning(
                            "the PostgreSQL follower cannot connect (\(error)); trying again (logged again when the "
                                + "reason changes, or a minute later)")
                    } else {
                        logger.log(.debug, "the PostgreSQL follower cannot connect: \(error)")
                    }
                    // The writer, told of the loss, may have connected again in the moment before the database
                    // went: idle, it would not notice, and the store would read "up" throughout the outage. Told
                    // once more (not at every try: a writer whose connection works would lose it each time).
                    if lost && !toldWriter {
                        toldWriter = true
                        queue.withLock { $0.writerConnectionSuspect = true }
                        writerWake.signal()
                    }
                    waitForFollowerWake(milliseconds: backoff.next())
                }
                continue
            }
            do throws(StorageError) {
                var names = queue.withLock { queue in
                    defer { queue.toFollow = [] }
                    return queue.toFollow
                }
                var blocked = try readLeftSources(current)
                var everything = readSoon || MonotonicClock.now() - lastCatchUp >= catchUpInterval
                for notification in try current.notifications() {
                    let words = notification.payload.split(separator: " ")
                    guard let from = words.first, from != origin else { continue }
                    for word in words.dropFirst() {
                        guard word != "*" else {
                            everything = true
                            continue
                        }
                        guard let colon = word.lastIndex(of: ":"), let seq = Int64(word[word.index(after: colon)...])
                        else { continue }
                        let name = String(word[..<colon])
                        if seq > delivery.applied(name) { names.insert(name) }
                    }
                }
                if everything {
                    blocked = try catchUp(current) || blocked
                    lastCatchUp = MonotonicClock.now()
                } else if names.isEmpty {
                    if !blocked { waitForFollower(socket: current.socket, until: lastCatchUp + catchUpInterval) }
                } else {
                    let wanted = Dictionary(uniqueKeysWithValues: names.map { ($0, Int64?.none) })
                    let followed = try follow(wanted, current, everyName: false)
                    if followed != .read { lastCatchUp = MonotonicClock.now() }
                    blocked = blocked || followed == .blocked
                }
                readSoon = blocked
                // The record waited for is released by the writer within moments (or by the read just made).
                if blocked {
                    waitForFollower(socket: current.socket, until: MonotonicClock.now() + blockedWait)
                    blockedWait = min(blockedWait * 2, 64)
                } else {
                    blockedWait = 2
                }
            } catch {
                logger.warning("the PostgreSQL follower lost its connection (\(error)); reconnecting")
                connection = nil
                lost = true
                queue.withLock { $0.writerConnectionSuspect = true }
                writerWake.signal()
            }
        }
        // Stopping: what still waits for a catch-up is committed, and is answered so.
        releaseWaiting()
    }

    /// Reads the records of the sources that this server's committed view moves leave (and of the collections
    /// holding their views' latest records, not applied here yet), then hands those batches on (with those behind
    /// them). A view's record is stored under its new source, so that collection's order alone
    /// does not put it after the records of its old source that another server committed before it and whose
    /// notification is not in hand yet: applied at once, a view moved away from `zeta` missed a write to `zeta`
    /// that came first, and stayed a version behind the servers started afterwards
    /// (`LivePostgresTests.aViewMovedByThisServerAfterAnotherServersWriteToItsSourceFollowsThatWrite`). The read
    /// hands those records on in id order, this server's own rows with them when it meets them.
    ///
    /// Returns whether the read stopped before a view's record (`Followed.blocked`). The batches are handed on all
    /// the same: what they wait for comes before their own records in the database's order, so before that view
    /// record, and was handed on; and the record held may be one of theirs.
    private func readLeftSources(_ connection: PGConnection) throws(StorageError) -> Bool {
        let waiting = queue.withLock { $0.committed.filter { !$0.isRead } }
        guard !waiting.isEmpty else { return false }
        let sources = waiting.reduce(into: Set<String>()) { $0.formUnion($1.sources) }
        let followed = try follow(
            Dictionary(uniqueKeysWithValues: sources.map { ($0, nil) }), connection, everyName: false)
        _ = markRead(Set(waiting.map(\.id)))
        releaseReadBatches()
        return followed == .blocked
    }

    /// Reads every collection's last sequence and the records this server has not applied, all in one snapshot
    /// (a read-only transaction): a record that committed before a view's move (`PostgresSchema.lockCollection`)
    /// is then read with it, whichever collections the last sequences showed behind.
    ///
    /// Returns whether it stopped before a view's record (`Followed.blocked`).
    @discardableResult
    private func catchUp(_ connection: PGConnection) throws(StorageError) -> Bool {
        // Read before the transaction's snapshot: every record applied here was committed before it, so its
        // collection's `last_seq` in the snapshot is at least this, unless the database lost commits.
        let appliedBefore = delivery.everyApplied
        // It holds no lock, so it may sit idle longer than a commit (handing on a page of large records).
        let opened = connection.pipeline([
            (sql: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", parameters: []),
            (sql: "SET LOCAL idle_in_transaction_session_timeout = '60s'", parameters: []),
        ])
        do throws(StorageError) {
            for outcome in opened { _ = try outcome.get() }
            let result = try connection.execute(PostgresSchema.lastSequences)
            metrics.caughtUp()
            var behind: [String: Int64?] = [:]
            for row in 0..<result.rows {
                let name = result.string(row, 0)
                let last = result.int64(row, 1)
                if last > delivery.applied(name) { behind[name] = last }
                if let applied = appliedBefore[name], last < applied { tellWentBack(name, to: last, from: applied) }
            }
            var blocked = false
            if !behind.isEmpty { blocked = try follow(behind, connection, everyName: true) == .blocked }
            try connection.execute("COMMIT")
            return blocked
        } catch {
            if !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
            throw error
        }
    }

    /// What `follow` did.
    private enum Followed {
        /// It read and handed on the records.
        case read
        /// It caught up every collection instead (`catchUp`).
        case caughtUp
        /// It stopped before a view's record that must wait for a record held here (`SequencedDelivery.holdsBefore`):
        /// the follower reads again in a moment.
        case blocked
    }

    /// Reads and hands on the records of the collections `wanted` after the last one applied of each, those of
    /// all of them in id order: a view's records, stored under each of its sources in turn, so take effect in the
    /// order they were committed. A collection's value, when known, is its last sequence: none left after the
    /// last one applied means they were purged.
    ///
    /// `everyName`: whether `wanted` holds every collection with records not applied (a catch-up, in one
    /// snapshot), rather than those some notifications named. In the second case a view's record may have been
    /// committed after records of its other source that no notification in hand names yet (a redefinition under
    /// `alpha` read before the definition under `zeta`: the view ended on the wrong source, found in
    /// `LivePostgresTests`); so a page that holds a view's record is left, and every collection is caught up
    /// instead (a read of every collection's `last_seq`, for each such page: view records are rare). So is a page
    /// of a collection that a view moved away from in a record not handed on here yet (`PostgresSchema.markLeft`,
    /// read after the page): the records of that collection committed after the move must take effect after it,
    /// which is stored under another collection.
    private func follow(_ wanted: [String: Int64?], _ connection: PGConnection, everyName: Bool)
        throws(StorageError) -> Followed
    {
        let page: Int64 = 1000
        let names = wanted.keys.sorted()
        let encodedNames = PGParameter.byteArrays(names.map { Array($0.utf8) })
        while true {
            let after = names.map { delivery.readThrough($0) }
            let records: (sql: String, parameters: [PGParameter]) = (
                sql: PostgresSchema.recordsOfAfter,
                parameters: [encodedNames, .int64s(after), .int64(page), .int64(Int64(pageBytes))]
            )
            let results = connection.pipeline(
                [records] + (everyName ? [] : [(sql: PostgresSchema.collectionsLeft, parameters: [encodedNames])]))
            let result = try results[0].get()
            // Copied out of the result once, for the check and for the hand-over.
            let rows = (0..<result.rows).map {
                (
                    name: result.string($0, 0), seq: result.int64($0, 1), record: result.bytes($0, 2),
                    id: result.int64($0, 3)
                )
            }
            if !everyName {
                let left = try results[1].get()
                let unread = (0..<left.rows).contains {
                    left.int64($0, 1) > delivery.applied(left.string($0, 0))
                }
                if unread || rows.contains(where: { RecordCodec.isViewRecord($0.record) }) {
                    return try catchUp(connection) ? .blocked : .caughtUp
                }
            }
            var read: Set<String> = []
            var readAgain = false
            let afterByName = Dictionary(uniqueKeysWithValues: zip(names, after))
            var start = 0
            // Each run of rows of one collection goes on at once, before the rows of others that follow it.
            while start < rows.count {
                let name = rows[start].name
                var end = start + 1
                while end < rows.count && rows[end].name == name { end += 1 }
                // A view's record waits for every record before it in the database's order: one held here (this
                // server's own, committed, that the writer has not released yet) would take effect after it. And
                // every record waits for a view's record before it that is held here (read by an earlier page).
                if let view = rows[start..<end].first(where: { RecordCodec.isViewRecord($0.record) }),
                    delivery.holdsBefore(view.id)
                {
                    return .blocked
                }
                if delivery.holdsViewRecordBefore(rows[start].id) { return .blocked }
                let (failed, gap) = delivery.offer(
                    name, rows[start..<end].map { (seq: $0.seq, record: $0.record, id: Optional($0.id)) })
                for record in failed { record.done(false) }
                // A gap behind where the read began: a record held here was dropped meanwhile (its transaction
                // rolled back), and its sequence is read again; past it, the records were compacted away.
                if gap && delivery.readThrough(name) < afterByName[name] ?? 0 {
                    readAgain = true
                } else if gap {
                    tellFallenBehind(name)
                    return .read
                }
                // A view's record held here itself (behind this server's own record, not released yet) holds up
                // the records after it in the database's order, of every collection.
                if rows[start..<end].contains(where: {
                    RecordCodec.isViewRecord($0.record) && $0.seq > delivery.applied(name)
                }) {
                    return .blocked
                }
                read.insert(name)
                start = end
            }
            if readAgain || Int64(rows.count) == page || rows.reduce(0, { $0 + $1.record.count }) >= pageBytes {
                continue
            }
            for (name, before) in zip(names, after) where !read.contains(name) {
                if let last = wanted[name] ?? nil, last > before, delivery.readThrough(name) == before {
                    tellFallenBehind(name)
                    return .read
                }
            }
            return .read
        }
    }

    /// The records of `name` after the last one applied are gone (compacted into a snapshot, or purged): told
    /// once, since the catch-ups that come while the server stops meet the same gap.
    private func tellFallenBehind(_ name: String) {
        guard let tell = takeFallenBehind() else { return }
        logger.log(
            .critical,
            "collection \(name): records after \(delivery.applied(name)) were compacted into a snapshot "
                + "before this server read them; it cannot go on with it from here")
        tell(name)
    }

    /// The database holds fewer records of `name` than this server applied: it lost commits it had acknowledged (a
    /// crash under `synchronous_commit = off`, a failover to a replica that was behind, a restore while servers
    /// ran). The versions this server served are gone, and the next writes take their sequences again: they were
    /// committed and never answered, while servers went on with different content under the same version. Told
    /// once, as a fall behind is: the server stops, and starts again from what the database holds. Found by the
    /// follower's catch-up, or by the writer when it is handed sequences this server applied already.
    func tellWentBack(_ name: String, to last: Int64, from applied: Int64) {
        guard let tell = takeFallenBehind() else { return }
        logger.log(
            .critical,
            "collection \(name): PostgreSQL holds its records up to \(last), but this server applied up to "
                + "\(applied): the database lost commits it had acknowledged (synchronous_commit off and a crash, a "
                + "failover to a replica that was behind, or a restore while servers ran); every server should start "
                + "again, and clients that saw the lost versions start over from a snapshot only if their epochs "
                + "change (scripts/new-epochs.py)")
        tell(name)
    }

    /// What to call when the server cannot go on, once: the catch-ups that come while it stops meet the same gap.
    private func takeFallenBehind() -> (@Sendable (String) -> Void)? {
        fallenBehind.withLock { tell in
            defer { tell = nil }
            return tell
        }
    }

    private func waitForFollowerWake(milliseconds: Int) {
        var descriptors = [pollfd(fd: followerWake.read, events: Int16(POLLIN), revents: 0)]
        _ = poll(&descriptors, 1, Int32(milliseconds))
        drainFollowerWake()
    }

    private func waitForFollower(socket: Int32, until deadline: Int64) {
        var descriptors = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: followerWake.read, events: Int16(POLLIN), revents: 0),
        ]
        _ = poll(&descriptors, 2, Int32(max(0, min(deadline - MonotonicClock.now(), 1000))))
        drainFollowerWake()
    }

    private func drainFollowerWake() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(followerWake.read, &buffer, buffer.count) > 0 {}
    }
}
