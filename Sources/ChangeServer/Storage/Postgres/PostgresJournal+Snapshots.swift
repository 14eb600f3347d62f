import Dispatch
import Glibc
import Model
import Synchronization

/// Snapshots: a collection that grew by `snapshotBytes` is copied on its lane and stored by the housekeeper, and
/// the records behind it purged; those owed one are tried again.
extension PostgresJournal {
    /// Records that stay in the table behind a snapshot, for servers that have not read them yet.
    static let keptRecords: Int64 = 1000

    /// Counts the committed batch's bytes per collection; a collection that grew by `snapshotBytes` since its last
    /// snapshot, or was deleted, is snapshotted, with the views it feeds, at its latest sequence. (Keys
    /// `view:<name>`, which databases written before views were sequenced with their source still hold, are not
    /// snapshotted.)
    ///
    /// So is the new source of a view the batch moves (`movedTo`), right behind the move: the move's record changes
    /// the view as its old source left it, and a snapshot of the old source written after the move (which no longer
    /// holds the view, or, from a server that had not read the move yet, holds it stale) covers the records a start
    /// would have rebuilt that from. The new source's snapshot holds the view as the move left it, and a start leaves
    /// the view out of other collections' snapshots that stand after the record that brought it there
    /// (`PostgresRecovery`).
    ///
    /// Called before the batch's records are handed on (`assigned`: their sequences): the copy is queued on the
    /// collection's lane right behind its last record of the batch, so that it holds exactly the state after that
    /// record, and no record handed on later (such as a view moving to another source) shows in it.
    func snapshotIfGrown(
        _ batch: [(collection: String, local: SequencedDelivery.Local)], _ assigned: [Range],
        movedTo: Set<String>, _ bytesSince: inout [String: Int]
    ) {
        for record in batch {
            bytesSince[record.collection, default: 0] += record.local.record.count
            if RecordCodec.deletesCollection(record.local.record) {
                _ = owedSnapshots.withLock { $0.insert(record.collection) }
            }
        }
        let owed = owedSnapshots.withLock { owed in
            owed.formUnion(movedTo)
            return owed
        }
        let grown = Set(bytesSince.filter { $0.value >= snapshotBytes }.map(\.key))
        let now = MonotonicClock.now()
        let waiting = snapshotRetryAt.withLock { at in at.filter { $0.value > now } }
        for name in grown.union(owed) where !name.hasPrefix(LaneRouter.lane(ofView: "")) {
            // Failed a moment ago: owed (or grown) still, tried once its wait is over, by a batch or the timer.
            if let retryAt = waiting[name] {
                trySnapshotsOwedLater(after: Int((retryAt - now + 999) / 1000))
                continue
            }
            guard snapshotting.withLock({ $0.insert(name).inserted }) else { continue }
            _ = owedSnapshots.withLock { $0.remove(name) }
            bytesSince[name] = 0
            let isOwed = owed.contains(name)
            let compacts = grown.contains(name) || !startSnapshots.withLock { $0.contains(name) }
            let snapshot: @Sendable (Int64) -> Void = { [self] seq in
                copier.withLock { $0 }?(name) { [self] copy in
                    writeSnapshot(name, seq, copy, owed: isOwed, compacting: compacts)
                }
            }
            if let seq = assigned.first(where: { $0.name == name }).map({ $0.first + Int64($0.count) - 1 }) {
                delivery.afterHandingOn(name, seq) { snapshot(seq) }
            } else {
                delivery.afterHandingOnLastCommitted(name, snapshot)
            }
        }
    }

    /// Stores the snapshot of `name` at `seq` (a `SnapshotFile` of the collection and its views) and, `compacting`,
    /// deletes the records it covers, but the last `keptRecords`; those too after `purgeDelay` when the collection
    /// is gone. Runs on the housekeeper, behind the snapshots and purges queued before it. A snapshot `owed`
    /// (`owedSnapshots`) that fails is owed again.
    private func writeSnapshot(_ name: String, _ seq: Int64, _ copy: Copy, owed: Bool, compacting: Bool) {
        housekeeper.run { [self] connection throws(StorageError) in
            let started = MonotonicClock.now()
            let bytes = SnapshotFile.encode(
                nextSegment: 0, collections: copy.content.map { [(name, $0)] } ?? [], views: copy.views)
            try connection.execute("BEGIN")
            try connection.execute(PostgresSchema.saveSnapshot, [.text(name), .int64(seq), .bytes(bytes)])
            if compacting {
                try connection.execute(PostgresSchema.compact, [.text(name), .int64(seq - Self.keptRecords)])
            }
            try connection.execute("COMMIT")
            metrics.snapshotStored()
            snapshotFailures.withLock { $0 = 0 }
            _ = snapshotRetryAt.withLock { $0.removeValue(forKey: name) }
            _ = snapshotting.withLock { $0.remove(name) }
            _ = startSnapshots.withLock { $0.remove(name) }
            logger.info(
                "snapshot of \(name) at record \(seq) (\(bytes.count) bytes, \(copy.views.count) views) written in "
                    + "\(MonotonicClock.now() - started) ms; "
                    + (compacting ? "records up to \(seq - Self.keptRecords) deleted" : "records kept"))
            if copy.content == nil { purgeLater([name: seq]) }
            trySnapshotsOwedLater()
        } failed: { [self] error in
            // Owed, grown or not: a collection that is not written again would otherwise keep its records (a grown
            // one was tried again only once it grew by `snapshotBytes` more). Tried again after a wait that doubles
            // with the failures in a row, so that a full disk is not asked every second.
            _ = owedSnapshots.withLock { $0.insert(name) }
            let failures = snapshotFailures.withLock { failures in
                failures += 1
                return failures
            }
            metrics.snapshotFailed()
            _ = snapshotting.withLock { $0.remove(name) }
            let wait = min(60, 1 << min(failures - 1, 6))
            snapshotRetryAt.withLock { $0[name] = MonotonicClock.now() + Int64(wait) * 1000 }
            logger.error(
                "snapshot of \(name) failed (\(error)); its records are kept and it will be tried again in \(wait) s")
            trySnapshotsOwedLater(after: wait)
        }
    }

    /// Another server's record, applied here, moved a view to `source`: this server owes `source` a snapshot too,
    /// at once, as the server that committed the move does (`snapshotIfGrown`). That one may stop before it writes
    /// its own, and a snapshot of the view's old source written here afterwards (which no longer holds the view)
    /// would then leave a start to rebuild the view from the move's record alone, at a new epoch: every cursor of
    /// it `410`. Each server of a fleet writes it, once per move; a snapshot at a sequence not past the stored one
    /// changes nothing (`PostgresSchema.saveSnapshot`). Called on the view's lanes once the move is applied, so the
    /// copy, queued behind it there, holds it.
    func remoteRecordMovedView(to source: String) {
        _ = owedSnapshots.withLock { $0.insert(source) }
        // Not through `trySnapshotsOwedLater`, which leaves a timer already set (after failed snapshots, up to a
        // minute away) as it is.
        queue.withLock { $0.owedSnapshotsDue = true }
        writerWake.signal()
    }

    /// Has the writer try the snapshots still owed `seconds` from now (one that failed, or one left out while its
    /// collection was being snapshotted already), even if no batch comes: a view's move must not wait for the next
    /// write for the snapshot of its new source.
    func trySnapshotsOwedLater(after seconds: Int = 1) {
        guard !owedSnapshots.withLock({ $0.isEmpty }) else { return }
        let timed = queue.withLock { queue in
            defer { queue.owedSnapshotsTimed = true }
            return queue.owedSnapshotsTimed
        }
        guard !timed else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) { [self] in
            queue.withLock { queue in
                queue.owedSnapshotsDue = true
                queue.owedSnapshotsTimed = false
            }
            writerWake.signal()
        }
    }

    /// Snapshots, now, what the start found it owes (`PostgresRecovery.Outcome`), without deleting the records
    /// behind them (`startSnapshots`):
    /// - The sources of view definitions it replayed, when those were evaluated on `worth` source items or more in
    ///   all (`definitionItems`, per source): the sources with the most, until what is left comes below `worth`.
    ///   Their records, of a few hundred bytes each, may never make a source grow by `snapshotBytes`, so every
    ///   start would replay them all again, each reading its whole source, where a view restored from a snapshot
    ///   reads only what its gate lets through (`GateIndex`). As `Snapshots.compactAfterStart` does on files.
    /// - The sources that replayed records moved views to (`movedTo`): such a record stands there alone when the
    ///   server that committed the move stopped before the snapshot it owed the new source (`snapshotIfGrown`), and
    ///   a later snapshot of the old source, without the view, would leave the view to be rebuilt from the move
    ///   alone, at a new epoch, its clients' cursors expired.
    func snapshotAfterStart(
        definitionItems: [String: Int], movedTo: Set<String>, worth: Int = Snapshots.definitionsWorthASnapshot
    ) {
        let sources = Self.sourcesToSnapshot(definitionItems, worth: worth)
        if !sources.isEmpty {
            logger.info(
                "snapshotting \(sources.count == 1 ? "1 collection" : "\(sources.count) collections") now: the "
                    + "start replayed view definitions that read \(definitionItems.values.reduce(0, +)) of their items")
        }
        let owed = movedTo.union(sources)
        guard !owed.isEmpty else { return }
        _ = startSnapshots.withLock { $0.formUnion(owed) }
        _ = owedSnapshots.withLock { $0.formUnion(owed) }
        trySnapshotsOwedLater(after: 0)
    }

    /// The fewest sources whose snapshots leave the definitions' items of the others below `worth`: those with the
    /// most first (ties by name, so that every server of a fleet picks the same).
    static func sourcesToSnapshot(_ definitionItems: [String: Int], worth: Int) -> [String] {
        var left = definitionItems.values.reduce(0, +)
        var sources: [String] = []
        for (source, items) in definitionItems.sorted(by: { ($0.value, $1.key) > ($1.value, $0.key) }) {
            guard left >= worth else { break }
            sources.append(source)
            left -= items
        }
        return sources
    }

    /// Snapshots the collection (as not there, unless a later record created it) so that its records are purged
    /// after `purgeDelay`, as a deleted collection's are: a write through this server to a collection it had not
    /// applied is journaled (`App.expectWritable`), and one to a name that was never created would otherwise leave
    /// its rows for good.
    func noteMissingCollection(_ name: String) {
        _ = owedSnapshots.withLock { $0.insert(name) }
        trySnapshotsOwedLater()
    }

    /// Deletes, after `purgeDelay`, the records of each deleted collection up to the given sequence, where a stored
    /// snapshot covers them (a collection of that name written since keeps its later records). A purge that fails
    /// (the database unreachable) is tried again, about 10 s later, then less and less often, up to every 5 min,
    /// until it succeeds or the journal closes: put off until the next start, a fleet that seldom restarts kept
    /// the rows for good. Its first failure is a warning and its success a notice; the tries between are logged at
    /// `info`. Purging twice is harmless.
    func purgeLater(
        _ deleted: [String: Int64], after delay: Int64? = nil, retrying backoff: Backoff = PostgresJournal.purgeBackoff,
        failures: Int = 0
    ) {
        guard !deleted.isEmpty else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(delay ?? purgeDelay))) { [self] in
            housekeeper.run { [self] connection throws(StorageError) in
                for (name, seq) in deleted.sorted(by: { $0.key < $1.key }) {
                    try connection.execute(PostgresSchema.purge, [.text(name), .int64(seq)])
                    logger.log(
                        failures == 0 ? .info : .notice,
                        "records of the deleted collection \(name) up to \(seq) purged"
                            + (failures == 0 ? "" : " (after \(failures) failed tries)"))
                }
            } failed: { [self] error in
                var backoff = backoff
                let retry = backoff.next()
                logger.log(
                    failures == 0 ? .warning : .info,
                    "purging the records of deleted collections failed (\(error)); tried again in "
                        + "\((retry + 999) / 1000) s")
                purgeLater(deleted, after: Int64(retry), retrying: backoff, failures: failures + 1)
            }
        }
    }

    /// How a failed purge is tried again: 5 to 10 s after the failure, the wait doubling up to 5 min.
    static let purgeBackoff = Backoff(first: 10_000, cap: 300_000)
}
