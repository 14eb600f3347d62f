import Dispatch
import Glibc
import Model
import Synchronization

/// Handing on: this server's committed batches, in commit order, to `SequencedDelivery`; those that move a view
/// wait for the follower to read the sources they leave.
extension PostgresJournal {
    /// A committed batch of this server, waiting to be handed on (see `handOn`).
    struct CommittedBatch {
        let id: Int
        let ranges: [Range]
        /// The sources its view records move views away from.
        let sources: Set<String>
        /// Whether those sources were read since it committed (or it waited `movePatience`, or has none).
        var isRead: Bool
        /// What it holds back: of the sources it leaves (`SequencedDelivery.hold`), let go once its records
        /// `after` names are handed on (those it does not hold back itself), or after `movePatience`; and its own
        /// records, until what they follow is handed on, or after `movePatience`.
        let hold: Hold
    }

    /// What a batch holds back (see `CommittedBatch.hold`).
    struct Hold {
        var barrier: Int?
        var after: [String: Int64] = [:]
        var wait: Int?

        static let none = Hold()
        var tokens: [Int] { [barrier, wait].compactMap { $0 } }
    }

    /// How long a batch that moves a view waits for the follower to read the sources it leaves before it is
    /// handed on without (a follower that cannot read: its connection lost, or its backend stalled).
    static let movePatience = 2000

    func lastMovesAway(
        _ byCollection: [String: [SequencedDelivery.Local]], _ assigned: [Range], _ leaves: [String: Set<String>]
    ) -> [String: (name: String, seq: Int64)] {
        guard !leaves.isEmpty else { return [:] }
        var moves: [String: (name: String, seq: Int64)] = [:]
        for range in assigned {
            for (offset, record) in (byCollection[range.name] ?? []).enumerated() {
                guard let change = RecordCodec.viewChange(record.record) else { continue }
                for source in leaves[change.view] ?? [] {
                    moves[source] = (range.name, range.first + Int64(offset))
                }
            }
        }
        return moves
    }

    /// The statements that note those moves in their sources' rows (`PostgresSchema.markLeft`).
    func leftMarks(_ moves: [String: (name: String, seq: Int64)]) -> [(sql: String, parameters: [PGParameter])] {
        moves.keys.sorted().compactMap { source in
            moves[source].map { mark in
                (sql: PostgresSchema.markLeft, parameters: [.text(source), .text(mark.name), .int64(mark.seq)])
            }
        }
    }

    /// The moves a batch's view records make: from each view's source as applied here to the collection the
    /// record is stored under, its new source, where the two differ.
    func viewMoves(_ records: [(view: String, collection: String)]) -> [(from: String, to: String)] {
        records.compactMap { record in
            guard let source = viewSource(record.view), source != record.collection else { return nil }
            return (source, record.collection)
        }
    }

    /// Hands on this server's committed batches in commit order. A batch that moves a view away from `sources` (or
    /// whose views' latest records are there, not applied yet) waits until the follower has read them
    /// (`readLeftSources`), at most `movePatience`, and the batches committed
    /// after it that touch those sources or its collections wait behind it: a write to the old source committed
    /// after the move must not take effect before it (`releaseReadBatches`). The follower reading one of these
    /// batches' rows does not hand it on (`SequencedDelivery.offer`).
    func handOn(_ ranges: [Range], leaving sources: Set<String>, hold: Hold) {
        let id = queue.withLock { queue in
            queue.lastBatchID += 1
            queue.committed.append(
                CommittedBatch(
                    id: queue.lastBatchID, ranges: ranges, sources: sources, isRead: sources.isEmpty, hold: hold))
            return queue.lastBatchID
        }
        if !sources.isEmpty {
            wakeFollower()
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Self.movePatience)) { [self] in
                guard markRead([id]) else { return }
                // Not read by now (a follower that cannot read): what it follows may never be handed on here, and
                // what it holds back goes without.
                for token in hold.tokens { delivery.release(token) }
                metrics.moveHandedOnUnread()
                logger.warning(
                    "a batch waited \(Self.movePatience) ms for the follower to read "
                        + "\(sources.sorted()); handed on without it")
                releaseReadBatches()
            }
        }
        releaseReadBatches()
    }

    /// Marks the batches of `ids` read; whether one of them was still waiting.
    func markRead(_ ids: Set<Int>) -> Bool {
        queue.withLock { queue in
            var marked = false
            for index in queue.committed.indices where ids.contains(queue.committed[index].id) {
                marked = marked || !queue.committed[index].isRead
                queue.committed[index].isRead = true
            }
            return marked
        }
    }

    /// Hands on the read batches, in commit order, but for those that touch a collection of a batch before them
    /// still waiting (one of its ranges, or a source it leaves): a move holds up the writes to the source it
    /// leaves, not every write. One thread at a time, so that two threads never hand on two batches out of order.
    func releaseReadBatches() {
        releasing.withLock { _ in
            let ready = queue.withLock { queue in
                var held: Set<String> = []
                var waiting: [CommittedBatch] = []
                var ready: [CommittedBatch] = []
                for batch in queue.committed {
                    if batch.isRead && batch.ranges.allSatisfy({ !held.contains($0.name) }) {
                        ready.append(batch)
                    } else {
                        held.formUnion(batch.sources)
                        held.formUnion(batch.ranges.map(\.name))
                        waiting.append(batch)
                    }
                }
                queue.committed = waiting
                return ready
            }
            var behind: [String] = []
            for batch in ready {
                // What the batch held back of the sources it leaves goes behind it, once it is handed on itself.
                if let barrier = batch.hold.barrier { delivery.release(barrier, after: batch.hold.after) }
                for range in batch.ranges where delivery.committed(range.name, first: range.first, count: range.count) {
                    behind.append(range.name)
                }
            }
            if !behind.isEmpty {
                // Records of other servers come before them that are not here yet: the follower reads them now.
                queue.withLock { $0.toFollow.formUnion(behind) }
                wakeFollower()
            }
        }
    }

    /// Hands on every batch still waiting, without a read and without what it follows: at a stop.
    func releaseWaiting() {
        let waiting = queue.withLock { $0.committed }
        _ = markRead(Set(waiting.map(\.id)))
        releaseReadBatches()
        for token in waiting.flatMap(\.hold.tokens) { delivery.release(token) }
    }

    /// The statements that note, for each view record of the batch, that it is its view's latest (in the order of
    /// the views' names, whose rows `PostgresSchema.lockView` took in that order).
    func viewNotes(_ byCollection: [String: [SequencedDelivery.Local]], _ assigned: [Range])
        -> [(sql: String, parameters: [PGParameter])]
    {
        var notes: [(view: String, parameters: [PGParameter])] = []
        for range in assigned {
            for (offset, record) in (byCollection[range.name] ?? []).enumerated() {
                guard let change = RecordCodec.viewChange(record.record) else { continue }
                let parameters: [PGParameter] = [
                    .text(change.view), .text(range.name), .int64(range.first + Int64(offset)),
                    .int64(change.note.rawValue),
                ]
                notes.append((change.view, parameters))
            }
        }
        return notes.sorted { $0.view < $1.view }.map { (sql: PostgresSchema.noteView, parameters: $0.parameters) }
    }

    /// The notification: this server's origin, then `key:lastSeq` for each collection or view (keys never hold
    /// spaces); `*` instead when that would not fit in a payload (under 8000 bytes), which makes readers compare
    /// every collection.
    func payload(_ assigned: [Range]) -> String {
        let entries = assigned.map { "\($0.name):\($0.first + Int64($0.count) - 1)" }
        let text = ([origin] + entries).joined(separator: " ")
        return text.utf8.count < 7000 ? text : origin + " *"
    }
}
