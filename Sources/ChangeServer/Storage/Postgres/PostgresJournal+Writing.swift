import Dispatch
import Glibc
import Model
import Synchronization

/// Writing: the writer thread, its connection and its group commits (see `PostgresJournal`).
extension PostgresJournal {
    func writeLoop() {
        var connection: PGConnection?
        /// Whether the writer had a connection and lost it: the next one made counts as a reconnection.
        var lost = false
        var backoff = Backoff()
        var connectFailures = RepeatedFailure()
        var unresolved: [Unanswered] = []
        var bytesSinceSnapshot: [String: Int] = [:]
        defer {
            for range in unresolved.flatMap(\.ranges) {
                for record in delivery.abandon(range.name, first: range.first, count: range.count) {
                    record.done(false)
                }
            }
            // Those the follower saw committed are answered so.
            for token in unresolved.flatMap(\.hold.tokens) { delivery.release(token) }
            handOn(unresolved.flatMap(\.ranges), leaving: [], hold: .none)
        }
        /// A connection found broken is let go: the next turn makes a new one, and the store is down until then.
        func letGoIfBroken(_ current: PGConnection) {
            guard current.isBroken else { return }
            connection = nil
            lost = true
            if metrics.setUp(false) {
                logger.error("lost the connection to PostgreSQL: mutations answer 503 until it is back")
            }
        }
        while true {
            if queue.withLock({ queue in
                defer { queue.writerConnectionSuspect = false }
                return queue.writerConnectionSuspect
            }) {
                lost = lost || connection != nil
                connection = nil
            }
            if connection == nil {
                do throws(StorageError) {
                    connection = try connect(resolving: &unresolved)
                    backoff.reset()
                    connectFailures.reset()
                    if lost { metrics.reconnected() }
                    lost = false
                    if metrics.setUp(true) {
                        logger.log(
                            .notice,
                            "PostgreSQL is reachable again"
                                + (metrics.takesWrites ? ": mutations are accepted" : " (its last transaction failed)"))
                    }
                } catch {
                    let wentDown = failPending()
                    let wait = backoff.next()
                    if connectFailures.isNewReason(error) || wentDown {
                        logger.error(
                            "cannot connect to PostgreSQL (\(error)): mutations answer 503 until it is back (tried "
                                + "again and again; logged again when the reason changes, or a minute later)")
                    } else {
                        logger.log(.debug, "cannot connect to PostgreSQL (\(error)); next try in \(wait) ms")
                    }
                    if queue.withLock({ $0.isClosing }) { return }
                    _ = writerWake.wait(timeout: .now() + .milliseconds(wait))
                    continue
                }
            }
            let batch: [(collection: String, local: SequencedDelivery.Local)]? = queue.withLock { queue in
                if queue.pending.isEmpty {
                    queue.writerIsIdle = true
                    queue.isCommitting = false
                    for waiter in queue.flushWaiters { waiter.signal() }
                    queue.flushWaiters = []
                    return queue.isClosing ? nil : []
                }
                defer { queue.pending = [] }
                queue.isCommitting = true
                queue.commitStarted = (MonotonicClock.now(), queue.pending.reduce(0) { $0 + $1.local.record.count })
                return queue.pending
            }
            guard let batch, var current = connection else { return }
            if batch.isEmpty {
                let owedDue = queue.withLock { queue in
                    defer { queue.owedSnapshotsDue = false }
                    return queue.owedSnapshotsDue
                }
                if owedDue {
                    snapshotIfGrown([], [], movedTo: [], &bytesSinceSnapshot)
                    continue
                }
                let failing = metrics.commitsFail
                guard failing || commitLog.withLock({ $0.owes(failing: failing) }) else {
                    writerWake.wait()
                    continue
                }
                // Idle while commits fail: a trial now and then tells when the database takes writes again, which
                // no client's write may come to tell; and a change the log owes is said once its minute is out.
                if writerWake.wait(timeout: .now() + .seconds(Self.trialSeconds)) == .timedOut {
                    if failing { tryWriting(on: current) } else { sayCommitState(error: nil) }
                    letGoIfBroken(current)
                }
                continue
            }
            var outcome = commit(batch, on: current, mayResend: true, &bytesSinceSnapshot)
            if case .unsent(let error) = outcome {
                // Nothing of it was committed (no COMMIT was sent), so it may go again, once: a connection that
                // the database ended while it sat idle is found so only by the next batch.
                logger.warning("the connection to PostgreSQL was found broken (\(error)); sending the batch again")
                do throws(StorageError) {
                    current = try connect(resolving: &unresolved)
                    connection = current
                    metrics.reconnected()
                    outcome = commit(batch, on: current, mayResend: false, &bytesSinceSnapshot)
                } catch {
                    logger.error("cannot reconnect to PostgreSQL (\(error)); \(batch.count) records not committed")
                    for record in batch { record.local.done(false) }
                }
            }
            if case .unanswered(let batch) = outcome { unresolved.append(batch) }
            commitAnswered(on: current)
            letGoIfBroken(current)
        }
    }

    /// A new connection, on which the records whose `COMMIT` got no answer are resolved first.
    private func connect(resolving unresolved: inout [Unanswered]) throws(StorageError) -> PGConnection {
        let fresh = try PGConnection(url, role: "writer")
        try resolve(&unresolved, on: fresh)
        return fresh
    }

    /// While the database cannot be connected to: what was appended before that was noticed is not durable.
    /// Returns whether the store went down with this (the caller logs why).
    private func failPending() -> Bool {
        let wentDown = metrics.setUp(false)
        let (failed, waiters) = queue.withLock { queue in
            defer {
                queue.pending = []
                queue.flushWaiters = []
                queue.isCommitting = false
                queue.writerIsIdle = true
            }
            return (queue.pending, queue.flushWaiters)
        }
        for record in failed { record.local.done(false) }
        for waiter in waiters { waiter.signal() }
        return wentDown
    }

    /// A transaction the database refused on a connection that still works (its disk full, say): the store takes
    /// no writes until one commits (`changeserver_store_up` 0, `/healthz` down), though writes are still tried,
    /// one of which finds it taking them again. Every one is counted; the log says so as `sayCommitState` decides.
    private func transactionFailed(_ error: StorageError, records: Int, on connection: PGConnection) {
        // A connection that broke is the loop's to report (the store is down until a new one is made).
        guard !connection.isBroken else {
            logger.error("a PostgreSQL transaction of \(records) records failed as its connection broke: \(error)")
            return
        }
        metrics.commitFailed()
        _ = metrics.setCommitsFailing(true)
        logger.log(.debug, "a PostgreSQL transaction of \(records) records failed: \(error)")
        sayCommitState(error: error)
    }

    /// Logs whether commits fail or are taken again when the log does not say so yet, in at most two lines a minute
    /// (`CommitStateLog`); `error`: the failure that brings this, if one does.
    private func sayCommitState(error: StorageError?) {
        let failing = metrics.commitsFail
        let line = commitLog.withLock { $0.line(failing: failing, error: error, now: MonotonicClock.now()) }
        func changed(_ count: Int) -> String {
            count == 0 ? "" : " (it refused and took them by turns \(count) more times in the minute before)"
        }
        switch line {
        case .failing(let reason, let changes):
            logger.error(
                "PostgreSQL refuses this server's transactions (\(reason)): mutations answer 503 until one commits"
                    + changed(changes) + "; changeserver_store_commit_failures_total counts each")
        case .takenAgain(let changes):
            logger.log(.notice, "PostgreSQL takes writes again: mutations are accepted" + changed(changes))
        case nil:
            break
        }
    }

    /// Seconds between the trials of an idle writer while commits fail (`tryWriting`).
    static let trialSeconds = 5

    /// A transaction that inserts a row no record has (collection `""`, sequence -1), deletes it and commits, so
    /// that nothing is left and no other session ever sees it, but the database writes and flushes as for a record:
    /// what a database that refuses writes (its disk full) refuses too. When it goes through, the store takes writes
    /// again.
    ///
    /// The watchdog (`watchCommit`) times it as a batch's commit: a trial the database leaves unanswered takes the
    /// store down, and new mutations get `503` instead of waiting behind it.
    private func tryWriting(on connection: PGConnection) {
        queue.withLock { $0.commitStarted = (MonotonicClock.now(), 0) }
        let outcomes = connection.pipeline([
            (sql: "BEGIN", parameters: []), (sql: PostgresSchema.trialInsert, parameters: []),
            (sql: PostgresSchema.trialDelete, parameters: []), (sql: "COMMIT", parameters: []),
        ])
        var failure: StorageError?
        do throws(StorageError) {
            for outcome in outcomes { _ = try outcome.get() }
        } catch {
            if !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
            logger.log(.debug, "a trial write to PostgreSQL failed: \(error)")
            failure = error
        }
        commitAnswered(on: connection)
        if let failure {
            if !connection.isBroken { sayCommitState(error: failure) }
        } else {
            committedAgain()
        }
    }

    /// The commit the watchdog timed (`watchCommit`) has its answer: the store is up again if the watchdog had taken
    /// it down and the connection still works.
    private func commitAnswered(on connection: PGConnection) {
        let cameBack = queue.withLock { queue in
            defer {
                queue.commitStarted = nil
                queue.isStalled = false
            }
            return queue.isStalled && !connection.isBroken && metrics.setUp(true)
        }
        if cameBack { logger.log(.notice, "PostgreSQL answers again: mutations are accepted") }
    }

    /// A transaction went through: the store takes writes again if commits had failed.
    private func committedAgain() {
        guard metrics.setCommitsFailing(false) || commitLog.withLock({ $0.owes(failing: false) }) else { return }
        sayCommitState(error: nil)
    }

    /// Tells the callers of records whose `COMMIT` got no answer what became of them: the rows that are there with
    /// their bytes committed; the others were rolled back and are not durable. Each batch leaves `batches` once
    /// resolved: a connection that breaks partway leaves the others for the next one, which would otherwise hand
    /// the first ones on again (and wait for their reads again).
    private func resolve(_ batches: inout [Unanswered], on connection: PGConnection) throws(StorageError) {
        while let batch = batches.first {
            var rolledBack = false
            for range in batch.ranges {
                let result = try connection.execute(
                    PostgresSchema.recordsAfter,
                    [.text(range.name), .int64(range.first - 1), .int64(Int64(range.count))])
                let rows = (0..<result.rows).map {
                    (seq: result.int64($0, 0), record: result.bytes($0, 1), id: Int64?.none)
                }
                var failed = delivery.offer(range.name, rows).failed
                failed += delivery.abandon(range.name, first: range.first, count: range.count)
                for record in failed { record.done(false) }
                rolledBack = rolledBack || !failed.isEmpty
                // Rows at those sequences may be another server's records (this transaction rolled back, and
                // another took the sequences): only this server's bytes count, which are the ones not failed.
                logger.warning(
                    "collection \(range.name): \(range.count) records whose commit got no answer: "
                        + "\(range.count - failed.count) were committed")
            }
            // The rows found are this server's records, committed: handed on in their turn among its batches,
            // after the reads they wait for, as at a commit; and the new sources of their moves are owed snapshots.
            owedSnapshots.withLock { $0.formUnion(batch.movedTo) }
            // Rolled back, it orders nothing, and the sequences it held back behind may never be filled: what it
            // holds back goes now.
            if rolledBack { for token in batch.hold.tokens { delivery.release(token) } }
            handOn(batch.ranges, leaving: batch.leaving, hold: rolledBack ? .none : batch.hold)
            batches.removeFirst()
        }
        trySnapshotsOwedLater()
    }

    /// A batch whose `COMMIT` got no answer: its ranges, and what `handOn` and `snapshotIfGrown` would have been
    /// given at its commit.
    private struct Unanswered {
        let ranges: [Range]
        let leaving: Set<String>
        let movedTo: Set<String>
        /// What the batch holds back (`CommittedBatch.hold`).
        let hold: Hold
    }

    /// What became of a batch sent to the database.
    private enum CommitOutcome {
        case committed
        /// Not committed, and every record's caller was told.
        case failed
        /// The connection broke during `COMMIT`: resolved on the next connection.
        case unanswered(Unanswered)
        /// The connection was found broken before `COMMIT` was sent: nothing was committed and nobody was told.
        case unsent(StorageError)
    }

    /// Commits `batch` in one transaction. When it does not commit, every record of it that was not seen committed
    /// by the follower is reported not durable, except when the connection broke during `COMMIT` (those are
    /// returned, to be resolved on the next connection) and, with `mayResend`, when it was found broken by the
    /// first round trip (the batch may be sent again, whole, on a new connection).
    ///
    /// Two round trips (libpq's pipeline mode): `BEGIN` and the appends, which tell each collection's sequences;
    /// then `COMMIT` and the wake-up. `COMMIT` is never sent with the appends: were the connection to break after
    /// it, the sequences the records got would be unknown, and they could not be resolved.
    private func commit(
        _ batch: [(collection: String, local: SequencedDelivery.Local)], on connection: PGConnection,
        mayResend: Bool, _ bytesSinceSnapshot: inout [String: Int]
    ) -> CommitOutcome {
        let started = MonotonicClock.nanoseconds()
        var byCollection: [String: [SequencedDelivery.Local]] = [:]
        for record in batch { byCollection[record.collection, default: []].append(record.local) }
        let names = byCollection.keys.sorted()
        var assigned: [Range] = []
        let appends = names.map { name in
            let records = byCollection[name] ?? []
            return (
                sql: PostgresSchema.append,
                parameters: [PGParameter.text(name), .int64(Int64(records.count)), .byteArrays(records.map(\.record))]
            )
        }
        // The batch's view records, read once; their views' rows first, in the order of their names
        // (`PostgresSchema.lockView`).
        let viewRecords = batch.compactMap { entry in
            RecordCodec.viewChange(entry.local.record).map { (view: $0.view, collection: entry.collection) }
        }
        let views = Set(viewRecords.map(\.view)).sorted()
        // Each view's source as noted in the database before this batch, where known; the collections holding
        // a latest record of one of its views that this server has not applied yet; and the sources the batch's
        // moves leave (per view), with the sequence past which their records follow the batch.
        var notedSources: [String: String] = [:]
        var unread: Set<String> = []
        var leaves: [String: Set<String>] = [:]
        var bounds: [String: Int64] = [:]
        var movesAway: [String: (name: String, seq: Int64)] = [:]
        // The records that the batch's own must follow, committed before them (the last of each collection).
        var follows: [String: Int64] = [:]
        func mustFollow(_ name: String, through seq: Int64) {
            guard seq > delivery.applied(name) else { return }
            unread.insert(name)
            follows[name] = max(follows[name] ?? 0, seq)
        }
        do throws(StorageError) {
            var opening: [(sql: String, parameters: [PGParameter])] = [(sql: "BEGIN", parameters: [])]
            if !views.isEmpty {
                // A round trip of its own: the sources the views leave, as the database has them, are locked
                // before any id is taken.
                let locked = connection.pipeline(
                    opening + views.map { (sql: PostgresSchema.lockView, parameters: [PGParameter.text($0)]) })
                _ = try locked[0].get()
                opening = []
                for (view, outcome) in zip(views, locked.dropFirst()) {
                    let noted = try outcome.get()
                    guard noted.rows == 1 else { continue }
                    if !noted.isNull(0, 0) { notedSources[view] = noted.string(0, 0) }
                    if !noted.isNull(0, 1) { mustFollow(noted.string(0, 1), through: noted.int64(0, 2)) }
                }
                for record in viewRecords {
                    let sources = [notedSources[record.view], viewSource(record.view)].compactMap { $0 }
                    leaves[record.view, default: []].formUnion(sources.filter { $0 != record.collection })
                }
            }
            let left = leaves.values.reduce(into: Set<String>()) { $0.formUnion($1) }.sorted()
            let lockedNames = left.isEmpty ? [] : Set(names).union(left).sorted()
            let locks = lockedNames.map { (sql: PostgresSchema.lockCollection, parameters: [PGParameter.text($0)]) }
            let results = connection.pipeline(opening + locks + appends)
            for outcome in results.prefix(opening.count) { _ = try outcome.get() }
            var lockedAt: [String: Int64] = [:]
            for (name, outcome) in zip(lockedNames, results.dropFirst(opening.count)) {
                lockedAt[name] = try outcome.get().int64(0, 0)
            }
            // The records of the sources left up to the lock come first; the batch's own in them go with it.
            for source in left { mustFollow(source, through: lockedAt[source] ?? 0) }
            for (name, outcome) in zip(names, results.dropFirst(opening.count + locks.count)) {
                let records = byCollection[name] ?? []
                let appended = try outcome.get()
                let last = appended.int64(0, 0)
                assigned.append((name, last - Int64(records.count) + 1, records.count))
                // A move away from the collection committed before it: the batch follows it, and waits for the
                // read of the move's collection, so that this server applies the move first, as every server does.
                if !appended.isNull(0, 2) { mustFollow(appended.string(0, 1), through: appended.int64(0, 2)) }
            }
            // The batch's own records of a source it leaves go before its last move away from it when their
            // collection's name comes first (their ids do), and are held back behind the batch when it comes after.
            movesAway = lastMovesAway(byCollection, assigned, leaves)
            for source in left {
                if let own = assigned.first(where: { $0.name == source }) {
                    let before = movesAway[source].map { source < $0.name } ?? true
                    bounds[source] = before ? own.first + Int64(own.count) - 1 : own.first - 1
                } else {
                    bounds[source] = lockedAt[source]
                }
            }
        } catch {
            if mayResend && connection.isBroken { return .unsent(error) }
            transactionFailed(error, records: batch.count, on: connection)
            if !connection.isBroken { _ = try? connection.execute("ROLLBACK") }
            for record in batch { record.local.done(false) }
            return .failed
        }
        // Sequences are handed out above every committed one, so above what was applied here, unless the database
        // lost commits (writes would refill the lost sequences before the follower's next catch-up could see it).
        for range in assigned where range.first <= delivery.applied(range.name) {
            tellWentBack(range.name, to: range.first - 1, from: delivery.applied(range.name))
        }
        for range in assigned { delivery.register(range.name, first: range.first, byCollection[range.name] ?? []) }
        // The records of the sources left that commit after this batch wait for it here, as they come after it in
        // the database's order (`PostgresSchema.lockCollection`); set before the commit, which they cannot precede.
        let barrier = bounds.isEmpty ? nil : delivery.hold(bounds)
        // And the batch's own wait for what they follow to be handed on: a read alone does not tell, as a record
        // read may still be held here (behind one of this server's own).
        let wait =
            follows.isEmpty
            ? nil
            : delivery.hold(
                Dictionary(assigned.map { ($0.name, $0.first - 1) }, uniquingKeysWith: min), until: follows)
        // The barrier goes once the batch's records are handed on, but for those it holds back itself.
        let after = Dictionary(
            assigned.filter { $0.count > 0 }.map { ($0.name, $0.first + Int64($0.count) - 1) }, uniquingKeysWith: max
        ).filter { (bounds[$0.key] ?? .max) >= $0.value }
        let hold = Hold(barrier: barrier, after: after, wait: wait)
        let moves = viewMoves(viewRecords)
        // The new sources the batch's moves snapshot: the moves as applied here, and those in the database's order
        // too (of a view whose latest move this server has not read yet).
        let movedTo = Set(moves.map(\.to)).union(
            viewRecords.compactMap { record -> String? in
                guard let noted = notedSources[record.view], noted != record.collection else { return nil }
                return record.collection
            })
        // The batch waits for the read of the sources it leaves, and of the collections holding what it follows, so
        // that this server applies those first, as every server does (it applied its own record first, and then an
        // older move of another server over it).
        let leaving = Set(bounds.keys).union(unread)
        // The wake-up goes in a transaction of its own, after the commit: NOTIFY takes a lock at commit that every
        // notifying transaction of the database shares, and inside the records' transaction it would be held
        // across their WAL flush, making the commits of all servers take turns. A lost wake-up only delays the
        // others until their next catch-up.
        let notes = viewNotes(byCollection, assigned) + leftMarks(movesAway)
        let committed = connection.pipeline(
            notes + [
                (sql: "COMMIT", parameters: []),
                (sql: PostgresSchema.notify, parameters: [.text(PostgresSchema.channel), .text(payload(assigned))]),
            ])
        do throws(StorageError) {
            for outcome in committed.prefix(notes.count + 1) { _ = try outcome.get() }
        } catch {
            guard connection.isBroken else {
                transactionFailed(error, records: batch.count, on: connection)
                // A statement before COMMIT failed, which skipped it: the transaction is still open.
                _ = try? connection.execute("ROLLBACK")
                var failed: [SequencedDelivery.Local] = []
                for range in assigned {
                    failed += delivery.abandon(range.name, first: range.first, count: range.count, rolledBack: true)
                }
                for record in failed { record.done(false) }
                for token in hold.tokens { delivery.release(token) }
                return .failed
            }
            logger.error("the connection broke during COMMIT of \(batch.count) records: resolved on reconnection")
            return .unanswered(Unanswered(ranges: assigned, leaving: leaving, movedTo: movedTo, hold: hold))
        }
        metrics.committed(seconds: Double(MonotonicClock.nanoseconds() - started) / 1e9)
        committedAgain()
        if case .failure(let error) = committed[notes.count + 1] {
            logger.warning("NOTIFY after a commit failed (\(error)); the other servers catch up within a second")
        }
        snapshotIfGrown(batch, assigned, movedTo: movedTo, &bytesSinceSnapshot)
        handOn(assigned, leaving: leaving, hold: hold)
        return .committed
    }

    /// For each source a view record of the batch moves its view away from, where the last such record is: it
    /// has the highest id (the records take ids in the order of their collections' names, then sequences).
}
