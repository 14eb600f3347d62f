import Dispatch
import Glibc
import Synchronization

/// Threads for bulk work, which takes time in proportion to a collection or a body (a full diff, the decoding of a
/// large body, a view's first evaluation), running at a lower scheduling priority (`niceness`) than the event loops,
/// the journal's threads and Dispatch's pool. When the CPUs are all busy, the kernel then gives most of their time
/// to small writes and reads, and a collection replaced back to back takes what is left, instead of halving the
/// throughput of every other collection on a two-CPU machine. When they are not, bulk work runs at full speed.
///
/// The priority is the thread's own (Linux keeps a nice value per thread), set once when the thread starts: an
/// unprivileged process may lower a thread's priority but never raise it again, so these threads are kept apart
/// from Dispatch's pool rather than lowered while they run bulk work. Started as needed, up to `limit`, and kept
/// for the life of the process.
///
/// Bulk work should not hold a lock that readers take: a replacement is diffed, and its collection's views
/// updated, on copies outside the locks, and a view is built from a copy of its source and redefined on a copy of
/// itself (`Executor`), so that a reader never waits at its own priority for work done at this one. Ops are still
/// applied under the collection's lock (a batch the incremental path cannot follow falls back to a full diff there).
final class BulkThreads: Sendable {
    /// The process's pool: as many threads as the CPUs of its affinity mask (not fewer for a cgroup quota, which
    /// limits time, not parallelism: bulk work waiting for a lock must not hold up another collection's).
    static let shared = BulkThreads(limit: max(2, CPUBudget.current().affinity))

    /// A pool of the same size for reads whose snapshot takes long to encode (`App.answerRead`), so that a burst of
    /// them (every client of a large collection resetting at once) never queues ahead of bulk writes, whose
    /// collections' lanes wait for them.
    static let reads = BulkThreads(limit: max(2, CPUBudget.current().affinity))

    /// The nice value of every thread of the pool: 10 more than the process's main thread (so that it is lower
    /// than the loops' however the process was started), at most 19.
    static let niceness: Int32 = min(19, mainThreadNiceness + 10)

    /// Whether bulk work runs at a lower priority than the rest at all: not in a process started at nice 19.
    static var isLower: Bool { niceness > mainThreadNiceness }

    /// On Linux, the nice value of a process's id is its main thread's.
    private static let mainThreadNiceness = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(getpid()))

    private struct State {
        /// Bulk work is rare and a piece takes long: a plain array is queue enough.
        var work: [@Sendable () -> Void] = []
        var threads = 0
        /// Threads waiting for a wake-up (so that `run` must send one).
        var waiting = 0
    }

    private let limit: Int
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Runs `work` on one of the threads, after the work handed in before it has started.
    func run(_ work: @escaping @Sendable () -> Void) {
        enum Action { case none, wake, start }
        let action = state.withLock { state -> Action in
            state.work.append(work)
            if state.waiting > 0 {
                state.waiting -= 1
                return .wake
            }
            guard state.threads < limit else { return .none }
            state.threads += 1
            return .start
        }
        switch action {
        case .none: break
        case .wake: wake.signal()
        case .start: if !startThread({ [self] in loop() }) { couldNotStartThread() }
        }
    }

    /// A thread could not be started: the pool makes do with the threads it has, and when it has none, what was
    /// handed in runs on Dispatch's pool, at normal priority, rather than never.
    private func couldNotStartThread() {
        let orphans = state.withLock { state -> [@Sendable () -> Void] in
            state.threads -= 1
            guard state.threads == 0 else { return [] }
            defer { state.work = [] }
            return state.work
        }
        for work in orphans { DispatchQueue.global().async(execute: work) }
    }

    private func loop() {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, Self.niceness)
        while true {
            let work = state.withLock { state -> (@Sendable () -> Void)? in
                guard !state.work.isEmpty else {
                    state.waiting += 1
                    return nil
                }
                return state.work.removeFirst()
            }
            if let work {
                work()
            } else {
                wake.wait()
            }
        }
    }
}
