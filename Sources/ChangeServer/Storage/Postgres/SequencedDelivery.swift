import Model
import Synchronization

/// Hands the records of each collection to the commit path in sequence order, whichever server committed them.
/// This server's own records arrive here when their transaction has assigned their sequences (not yet committed),
/// the records of other servers when the follower reads them; a record is handed on once every record before it in
/// its collection has been, an own one once the writer released it (`committed`: after its commit, in the order
/// the journal keeps among this server's batches), a row the follower reads of it only proving that commit. So this
/// server's answers and the records of others interleave exactly as in the database, nothing is handed on twice (a
/// sequence at or below `applied` is ignored), and a gap waits until the follower fills it.
///
/// Handing on happens under this object's lock, so the lanes receive the records of a collection in sequence
/// order.
final class SequencedDelivery: Sendable {
    /// A record of this server, waiting for its transaction.
    struct Local: Sendable {
        let record: [UInt8]
        let done: @Sendable (Bool) -> Void
    }

    /// Where an own record stands.
    private enum Own {
        /// Its transaction has not committed, as far as this server knows.
        case pending
        /// The follower read it: committed, but not released by the writer yet.
        case seen
        /// The writer released it: handed on in its turn.
        case released
    }

    private enum Held {
        case local(Local, Own)
        /// Committed by another server (nil: unreadable, skipped with an error in the log), and its encoded size.
        case remote(JournalRecord?, bytes: Int)
    }

    /// Records held back past a sequence of some collections (`hold`), until the records they wait for are handed
    /// on (`release`).
    private struct Barrier {
        let bounds: [String: Int64]
        /// The last sequence of each collection to hand on before it is lifted; nil until `release`.
        var until: [String: Int64]?
    }

    private struct State {
        /// The sequence of the last record handed on, per collection.
        var applied: [String: Int64] = [:]
        var held: [String: [Int64: Held]] = [:]
        /// Work to run right after a record is handed on (a snapshot's copy, queued on the lane behind it).
        var afterHandingOn: [String: [Int64: [@Sendable () -> Void]]] = [:]
        /// The ids of the records held that the follower read (`offer`), by collection and sequence; and of those
        /// that are views' records.
        var ids: [String: [Int64: Int64]] = [:]
        var viewIDs: [String: [Int64: Int64]] = [:]
        /// Sequences past which records wait (`hold`), by the token that set them.
        var barriers: [Int: Barrier] = [:]
        var lastBarrier = 0
        var applyRemote: (@Sendable (JournalRecord, _ bytes: Int) -> Void)?
    }

    private let state = Mutex(State())
    private let logger: Logger

    init(applied: [String: Int64], logger: Logger) {
        self.logger = logger
        state.withLock { $0.applied = applied }
    }

    /// Where records of other servers go, with their encoded size (the committer applies them on their lanes, a
    /// large one as bulk work); set before any arrives.
    func start(applyingRemote apply: @escaping @Sendable (JournalRecord, _ bytes: Int) -> Void) {
        state.withLock { $0.applyRemote = apply }
    }

    /// The highest sequence of `name` known committed: the last handed on, or a committed record of this server
    /// still waiting for those before it.
    func lastCommitted(_ name: String) -> Int64 {
        state.withLock { Self.lastCommitted(name, $0) }
    }

    private static func lastCommitted(_ name: String, _ state: State) -> Int64 {
        let waiting = (state.held[name] ?? [:]).compactMap { seq, held -> Int64? in
            if case .local(_, let own) = held, own != .pending { return seq }
            return nil
        }
        return max(state.applied[name] ?? 0, waiting.max() ?? 0)
    }

    /// The sequence of the last record of `name` handed on.
    func applied(_ name: String) -> Int64 {
        state.withLock { $0.applied[name] ?? 0 }
    }

    /// The last sequence applied of every collection.
    var everyApplied: [String: Int64] { state.withLock { $0.applied } }

    /// The sequence of `name` up to which every record is here: handed on, or held in order after that (this
    /// server's own once the follower saw them or the writer released them). The follower reads on from there:
    /// from the last one handed on, it read again, page after page, the records held behind one that waits (this
    /// server's own, behind a view's move that waits for that very read).
    func readThrough(_ name: String) -> Int64 {
        state.withLock { Self.readThrough(name, $0) }
    }

    private static func readThrough(_ name: String, _ state: State) -> Int64 {
        var through = state.applied[name] ?? 0
        while let held = state.held[name]?[through + 1] {
            if case .local(_, .pending) = held { break }
            through += 1
        }
        return through
    }

    /// Records of this server that took sequences `first...` in a transaction not yet committed.
    func register(_ name: String, first: Int64, _ records: [Local]) {
        state.withLock { state in
            for (offset, record) in records.enumerated() {
                state.held[name, default: [:]][first + Int64(offset)] = .local(record, .pending)
            }
        }
    }

    /// The transaction of `count` records from `first` committed, and the writer releases them: they are handed on
    /// as soon as every record before them is. Returns whether records of other servers come before them that are
    /// not here yet (the follower should read them now).
    func committed(_ name: String, first: Int64, count: Int) -> Bool {
        state.withLock { state in
            for seq in first..<(first + Int64(count)) {
                if case .local(let local, _) = state.held[name]?[seq] {
                    state.held[name]?[seq] = .local(local, .released)
                }
            }
            drain(name, &state)
            return state.held[name] != nil
        }
    }

    /// The transaction failed, or its outcome is being resolved: its records not known committed are dropped and
    /// returned, for their callers to hear that they are not durable. A record the follower saw committed stays,
    /// for the writer to release; but not after a rollback (`rolledBack`): a row read at its sequence was then
    /// another server's record with the same bytes, which the follower reads again as such.
    func abandon(_ name: String, first: Int64, count: Int, rolledBack: Bool = false) -> [Local] {
        state.withLock { state in
            var dropped: [Local] = []
            for seq in first..<(first + Int64(count)) {
                if case .local(let local, let own) = state.held[name]?[seq],
                    own == .pending || (rolledBack && own == .seen)
                {
                    state.held[name]?[seq] = nil
                    state.ids[name]?[seq] = nil
                    state.viewIDs[name]?[seq] = nil
                    dropped.append(local)
                }
            }
            if state.held[name]?.isEmpty == true { state.held[name] = nil }
            if state.ids[name]?.isEmpty == true { state.ids[name] = nil }
            if state.viewIDs[name]?.isEmpty == true { state.viewIDs[name] = nil }
            return dropped
        }
    }

    /// What the follower read: committed records of `name` in sequence order. A row that is one of this server's
    /// own records waiting for its commit to return proves that commit (it is still handed on only when the writer
    /// releases it); one at a sequence where this server holds a different record of its own means that transaction
    /// failed, and that record is returned as not durable.
    /// Returns also whether the rows start past a gap that nothing here fills (their records were compacted into
    /// a snapshot): after the next sequence not here (`readThrough`).
    func offer(_ name: String, _ rows: [(seq: Int64, record: [UInt8], id: Int64?)]) -> (failed: [Local], gap: Bool) {
        var decoded: [Int64: JournalRecord?] = [:]
        for row in rows {
            do throws(BinaryReader.Malformed) {
                decoded[row.seq] = try RecordCodec.decode(row.record)
            } catch {
                logger.error("record \(row.seq) of collection \(name) in PostgreSQL is unreadable: skipped")
                decoded[row.seq] = .some(nil)
            }
        }
        return state.withLock { state in
            let applied = state.applied[name] ?? 0
            let through = Self.readThrough(name, state)
            var failed: [Local] = []
            for row in rows where row.seq > applied {
                if let id = row.id {
                    state.ids[name, default: [:]][row.seq] = id
                    if RecordCodec.isViewRecord(row.record) { state.viewIDs[name, default: [:]][row.seq] = id }
                }
                if case .local(let local, let own) = state.held[name]?[row.seq] {
                    if local.record == row.record {
                        if own == .pending { state.held[name]?[row.seq] = .local(local, .seen) }
                        continue
                    }
                    failed.append(local)
                }
                state.held[name, default: [:]][row.seq] = .remote(decoded[row.seq] ?? nil, bytes: row.record.count)
            }
            drain(name, &state)
            let gap = rows.first.map { $0.seq > through + 1 && (state.applied[name] ?? 0) == applied } ?? false
            return (failed, gap)
        }
    }

    /// Whether a record the follower read with an id below `id` is still held here, not handed on: one of this
    /// server's own, committed and not released by the writer yet, or one behind a gap. A view's move of id `id`
    /// must wait for it, as it takes effect after it on every other server.
    func holdsBefore(_ id: Int64) -> Bool {
        state.withLock { state in state.ids.values.contains { $0.values.contains { $0 < id } } }
    }

    /// Whether a view's record the follower read with an id below `id` is still held here, not handed on (behind
    /// one of this server's own records, or a gap): every record after it in the database's order must wait for it,
    /// as it takes effect after it on every other server.
    func holdsViewRecordBefore(_ id: Int64) -> Bool {
        state.withLock { state in state.viewIDs.values.contains { $0.values.contains { $0 < id } } }
    }

    /// Holds back the records of each collection of `bounds` past its sequence there, until `release` is called
    /// with the token returned and what it names is handed on (or, given `until`, until the records it names are
    /// handed on, or `release` is called without them): those of a view's old source committed after this
    /// server's move of the view, which must take effect after the move, as on every other server; or a batch's
    /// own records, which must take effect after records committed before them that they depend on (a move).
    func hold(_ bounds: [String: Int64], until: [String: Int64]? = nil) -> Int {
        state.withLock { state in
            state.lastBarrier += 1
            state.barriers[state.lastBarrier] = Barrier(bounds: bounds, until: until)
            if until != nil { liftBarriers(&state) }
            return state.lastBarrier
        }
    }

    /// Lets the records that `hold` held back go, in their turn, once the records of each collection of `after` up
    /// to its sequence there are handed on (at once when it is empty): the batch that held them, which may itself
    /// wait for records of other servers before it.
    func release(_ token: Int, after: [String: Int64] = [:]) {
        state.withLock { state in
            state.barriers[token]?.until = after
            liftBarriers(&state)
        }
    }

    /// Lifts the barriers whose records are handed on, and hands on what they held back.
    private func liftBarriers(_ state: inout State) {
        let lifted = state.barriers.filter { _, barrier in
            barrier.until?.allSatisfy { name, seq in seq <= state.applied[name] ?? 0 } ?? false
        }
        for token in lifted.keys { state.barriers[token] = nil }
        for name in Set(lifted.values.flatMap(\.bounds.keys)).sorted() { drain(name, &state) }
    }

    /// Runs `action` right after record `seq` of `name` is handed on, under this object's lock (so that work it
    /// queues on the collection's lane comes after that record and before the next); at once if it was.
    func afterHandingOn(_ name: String, _ seq: Int64, _ action: @escaping @Sendable () -> Void) {
        state.withLock { Self.afterHandingOn(name, seq, action, &$0) }
    }

    /// `afterHandingOn` at `name`'s last committed sequence (`lastCommitted`), read under the same lock, which
    /// `action` is given. Read apart, a record handed on between the two ran before an action run at once: a
    /// snapshot's copy then held it, labelled with the sequence before it, and a start applied it twice.
    func afterHandingOnLastCommitted(_ name: String, _ action: @escaping @Sendable (Int64) -> Void) {
        state.withLock { state in
            let seq = Self.lastCommitted(name, state)
            Self.afterHandingOn(name, seq, { action(seq) }, &state)
        }
    }

    private static func afterHandingOn(
        _ name: String, _ seq: Int64, _ action: @escaping @Sendable () -> Void, _ state: inout State
    ) {
        guard seq > state.applied[name] ?? 0 else { return action() }
        state.afterHandingOn[name, default: [:]][seq, default: []].append(action)
    }

    /// Hands on every record of `name` that is next in order and committed.
    private func drain(_ name: String, _ state: inout State) {
        var next = (state.applied[name] ?? 0) + 1
        let bound = state.barriers.values.compactMap { $0.bounds[name] }.min() ?? .max
        handing: while next <= bound, let held = state.held[name]?[next] {
            switch held {
            case .local(let local, let own):
                guard own == .released else { break handing }
                local.done(true)
            case .remote(let record, let bytes):
                if let record { state.applyRemote?(record, bytes) }
            }
            state.held[name]?[next] = nil
            state.ids[name]?[next] = nil
            state.viewIDs[name]?[next] = nil
            state.applied[name] = next
            if let actions = state.afterHandingOn[name]?.removeValue(forKey: next) {
                for action in actions { action() }
                if state.afterHandingOn[name]?.isEmpty == true { state.afterHandingOn[name] = nil }
            }
            next += 1
        }
        if state.held[name]?.isEmpty == true { state.held[name] = nil }
        if state.ids[name]?.isEmpty == true { state.ids[name] = nil }
        if state.viewIDs[name]?.isEmpty == true { state.viewIDs[name] = nil }
        if state.barriers.values.contains(where: { $0.until?[name] != nil }) { liftBarriers(&state) }
    }
}
