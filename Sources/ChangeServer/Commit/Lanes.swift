import Dispatch
import Synchronization

/// One serial lane of work per collection name: work for a name runs one piece at a time, in the order it was
/// handed in, while the lanes of different names run in parallel on Dispatch's pool. This is what keeps a large
/// write to one collection from holding up the others: the journal still orders every record, but applying,
/// diffing and encoding happen on the record's own lane. Keyed by name, not by collection, so that a deletion
/// and a re-creation of the same name stay in order too.
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
        let queue = lanes.withLock { lanes in
            if lanes[name] == nil {
                lanes[name] = Lane(queue: DispatchQueue(label: "changeserver.lane", target: pool), pending: 0)
            }
            lanes[name]!.pending += 1
            return lanes[name]!.queue
        }
        queue.async { [self] in
            work()
            finished(name)
        }
    }

    private func finished(_ name: String) {
        lanes.withLock { lanes in
            lanes[name]?.pending -= 1
            if lanes[name]?.pending == 0 { lanes[name] = nil }
        }
    }

    /// Visits every name at one point of the record order: a name whose lane has work queued is visited on its lane
    /// once that work is done (and before anything handed in later); every other name of `names` (called with no
    /// work able to start meanwhile) is visited at once. `done` runs once every visit has. This is how a snapshot
    /// sees exactly the records handed in before it, and none after.
    func visitAtConsistentPoint(
        names: () -> [String], visit: @escaping @Sendable (String) -> Void, then done: @escaping @Sendable () -> Void
    ) {
        let remaining = Atomic<Int>(1)
        let finishOne: @Sendable () -> Void = {
            if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done() }
        }
        lanes.withLock { lanes in
            for name in names() where lanes[name] == nil { visit(name) }
            remaining.add(lanes.count, ordering: .acquiringAndReleasing)
            for (name, lane) in lanes {
                lanes[name]?.pending += 1
                lane.queue.async { [self] in
                    visit(name)
                    finished(name)
                    finishOne()
                }
            }
        }
        finishOne()
    }
}
