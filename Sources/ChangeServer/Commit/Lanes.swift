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
final class Lanes: Sendable {
    private struct Lane {
        let queue: DispatchQueue
        /// Pieces of work handed in and not yet finished; the lane is dropped when it reaches 0.
        var pending: Int
    }

    private let lanes = Mutex<[String: Lane]>([:])
    private let pool = DispatchQueue(label: "changeserver.lanes", qos: .userInitiated, attributes: .concurrent)

    /// Runs `work` on the lane of `name`, after everything handed to that lane before.
    func run(_ name: String, _ work: @escaping @Sendable () -> Void) {
        lanes.withLock { lanes in
            enqueue(name, in: &lanes) { [self] in
                work()
                finished(name)
            }
        }
    }

    /// Runs `work` once, after everything handed before to any of the lanes of `names`, and before anything handed
    /// to them after.
    func run(_ names: Set<String>, _ work: @escaping @Sendable () -> Void) {
        guard names.count > 1 else { return run(names.first ?? "", work) }
        let gate = Gate(count: names.count)
        lanes.withLock { lanes in
            for name in names {
                let queue = reserve(name, in: &lanes)
                queue.async { [self] in
                    // Suspending takes effect when this block returns: the lane holds still until `work` ran.
                    queue.suspend()
                    if gate.arrive(queue) {
                        work()
                        for name in names { finished(name) }
                        gate.resumeAll()
                    }
                }
            }
        }
    }

    /// Enqueues `block` on the lane of `name`. Under the lock.
    private func enqueue(_ name: String, in lanes: inout [String: Lane], _ block: @escaping @Sendable () -> Void) {
        reserve(name, in: &lanes).async(execute: block)
    }

    /// Counts one more piece of work for the lane of `name`, making the lane if needed; returns its queue. The
    /// piece must call `finished(name)` when done. Under the lock.
    private func reserve(_ name: String, in lanes: inout [String: Lane]) -> DispatchQueue {
        let lane = lanes[name] ?? Lane(queue: DispatchQueue(label: "changeserver.lane", target: pool), pending: 0)
        lanes[name] = Lane(queue: lane.queue, pending: lane.pending + 1)
        return lane.queue
    }

    private func finished(_ name: String) {
        lanes.withLock { lanes in
            guard let lane = lanes[name] else { return }
            lanes[name] = lane.pending > 1 ? Lane(queue: lane.queue, pending: lane.pending - 1) : nil
        }
    }

    /// Visits every name at one point of the record order: a name whose lane has work queued is visited on its lane
    /// once that work is done (and before anything handed in later); every other name of `names` (called with no
    /// work able to start meanwhile) is visited at once. `done` runs once every visit has. This is how a snapshot
    /// sees exactly the records handed in before it, and none after.
    func visitAtConsistentPoint(
        names: () -> [String], visit: @escaping @Sendable (String) -> Void, then done: @escaping @Sendable () -> Void
    ) {
        let gate = Gate(count: 1)
        lanes.withLock { lanes in
            for name in Set(names()) where lanes[name] == nil { visit(name) }
            gate.expect(more: lanes.count)
            for name in Array(lanes.keys) {
                enqueue(name, in: &lanes) { [self] in
                    visit(name)
                    finished(name)
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
