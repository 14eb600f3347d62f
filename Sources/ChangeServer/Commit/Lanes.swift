import Dispatch
import Synchronization

/// One serial lane of work per name (a collection's name): work for a name runs one piece at a time, in the order
/// it was handed in, while the lanes of different names run in parallel on Dispatch's pool. This is what keeps a
/// large write to one collection from holding up the others: the journal still orders every record, but applying,
/// diffing and encoding happen on the record's own lane. Keyed by name, not by collection, so that a deletion and
/// a re-creation of the same name stay in order too.
///
/// Work handed to several lanes at once (`run(_:_:)` with several names) runs once every one of those lanes has
/// reached it, while they all wait: so it is ordered with everything handed to any of them. Work is enqueued under
/// one lock, so every lane sees multi-lane work in the same order and none can wait for another in a cycle.
///
/// Bulk work (`bulk: true`: a full diff, a large body's decoding) runs in its turn on a thread of `BulkThreads`,
/// at a lower priority, its lanes holding still meanwhile: ordered as any other work, it gives way to small writes
/// when the CPUs are busy.
final class Lanes: Sendable {
    private final class Lane: Sendable {
        let queue: DispatchQueue
        /// Pieces of work handed in and not yet finished. Counted up under the lock, down without it.
        let pending = Atomic<Int>(0)

        init(queue: DispatchQueue) {
            self.queue = queue
        }
    }

    private struct State {
        var lanes: [String: Lane] = [:]
        /// Idle lanes are dropped when there are this many (so names that come and go leave nothing behind).
        var sweepAt = 1024
    }

    private let state = Mutex(State())
    private let pool = DispatchQueue(label: "changeserver.lanes", qos: .userInitiated, attributes: .concurrent)
    private let bulkThreads: BulkThreads

    init(bulkThreads: BulkThreads = .shared) {
        self.bulkThreads = bulkThreads
    }

    /// Runs `work` on the lane of `name`, after everything handed to that lane before; with `bulk`, on a thread of
    /// `BulkThreads`, the lane holding still until it is done.
    func run(_ name: String, bulk: Bool = false, _ work: @escaping @Sendable () -> Void) {
        state.withLock { state in
            let lane = reserve(name, in: &state)
            lane.queue.async { [bulkThreads] in
                guard bulk else {
                    work()
                    return Self.finished(lane)
                }
                // Suspending takes effect when this block returns: nothing later starts on the lane meanwhile.
                lane.queue.suspend()
                bulkThreads.run {
                    work()
                    // Resumed before it counts as idle, so that a lane dropped as idle is never left suspended.
                    lane.queue.resume()
                    Self.finished(lane)
                }
            }
        }
    }

    /// Runs `attempt` on the calling thread, at once, when the lane of `name` has nothing queued or running,
    /// holding the lane's queue meanwhile (work handed to it then waits until `attempt` returns). When the lane is
    /// busy, or `attempt` returns false (it did nothing), `work` runs on the lane in its turn instead. True when
    /// `attempt` did the work here. This spares light work the hand-over to another thread: waking a pool thread
    /// costs more than applying a small record.
    @discardableResult
    func runInPlaceIfIdle(
        _ name: String, attempt: () -> Bool, otherwise work: @escaping @Sendable () -> Void
    ) -> Bool {
        let idle: Lane? = state.withLock { state in
            let lane = reserve(name, in: &state)
            // Only `reserve` counts up, under this lock: 1 is this piece alone. A block that counted itself
            // finished may still be returning, but runs nothing more.
            guard lane.pending.load(ordering: .acquiring) == 1 else {
                lane.queue.async {
                    work()
                    Self.finished(lane)
                }
                return nil
            }
            lane.queue.suspend()
            return lane
        }
        guard let idle else { return false }
        let done = attempt()
        // Still counted, so the same lane: `work` goes behind what was handed to it meanwhile, before anything later.
        if !done { run(name, work) }
        // Resumed before it counts as idle, so that a lane dropped as idle (`reserve`) is never left suspended.
        idle.queue.resume()
        Self.finished(idle)
        return done
    }

    /// Runs `work` once, after everything handed before to any of the lanes of `names`, and before anything handed
    /// to them after; with `bulk`, on a thread of `BulkThreads`.
    func run(_ names: Set<String>, bulk: Bool = false, _ work: @escaping @Sendable () -> Void) {
        guard names.count > 1 else { return run(names.first ?? "", bulk: bulk, work) }
        let gate = Gate(count: names.count)
        state.withLock { state in
            let lanes = names.map { reserve($0, in: &state) }
            let runAndRelease: @Sendable () -> Void = {
                work()
                for lane in lanes { Self.finished(lane) }
                gate.resumeAll()
            }
            for lane in lanes {
                lane.queue.async { [bulkThreads] in
                    // Suspending takes effect when this block returns: the lane holds still until `work` ran.
                    lane.queue.suspend()
                    guard gate.arrive(lane.queue) else { return }
                    if bulk { bulkThreads.run(runAndRelease) } else { runAndRelease() }
                }
            }
        }
    }

    /// Counts one more piece of work for the lane of `name`, making the lane if needed. The piece must call
    /// `finished` when done. Under the lock.
    private func reserve(_ name: String, in state: inout State) -> Lane {
        if let lane = state.lanes[name] {
            lane.pending.add(1, ordering: .relaxed)
            return lane
        }
        if state.lanes.count >= state.sweepAt {
            // A lane whose count is 0 has no work queued, and only `reserve` (under this lock) counts up.
            state.lanes = state.lanes.filter { $0.value.pending.load(ordering: .acquiring) > 0 }
            state.sweepAt = max(1024, 2 * state.lanes.count)
        }
        let lane = Lane(queue: DispatchQueue(label: "changeserver.lane", target: pool))
        lane.pending.add(1, ordering: .relaxed)
        state.lanes[name] = lane
        return lane
    }

    private static func finished(_ lane: Lane) {
        lane.pending.subtract(1, ordering: .releasing)
    }

    /// Visits every name at one point of the record order: a name whose lane has work queued is visited on its lane
    /// once that work is done (and before anything handed in later); every other name of `names` (called with no
    /// work able to start meanwhile) is visited at once. `done` runs once every visit has. This is how a snapshot
    /// sees exactly the records handed in before it, and none after.
    func visitAtConsistentPoint(
        names: () -> [String], visit: @escaping @Sendable (String) -> Void, then done: @escaping @Sendable () -> Void
    ) {
        let gate = Gate(count: 1)
        state.withLock { state in
            let busy = state.lanes.filter { $0.value.pending.load(ordering: .acquiring) > 0 }
            for name in Set(names()) where busy[name] == nil { visit(name) }
            gate.expect(more: busy.count)
            for name in busy.keys {
                let lane = reserve(name, in: &state)
                lane.queue.async {
                    visit(name)
                    Self.finished(lane)
                    if gate.arrive(nil) { done() }
                }
            }
        }
        if gate.arrive(nil) { done() }
    }
}

/// Counts arrivals at a point several lanes must reach, keeping the queues that wait there.
private final class Gate: Sendable {
    private let state: Mutex<(remaining: Int, waiting: [DispatchQueue])>

    init(count: Int) {
        state = Mutex((count, []))
    }

    func expect(more count: Int) {
        state.withLock { $0.remaining += count }
    }

    /// Records an arrival (with the queue that waits, if any); true for the last one.
    func arrive(_ queue: DispatchQueue?) -> Bool {
        state.withLock { state in
            if let queue { state.waiting.append(queue) }
            state.remaining -= 1
            return state.remaining == 0
        }
    }

    func resumeAll() {
        for queue in state.withLock({ $0.waiting }) { queue.resume() }
    }
}
