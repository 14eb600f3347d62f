import Dispatch
import Glibc
import Synchronization

/// Threads for bulk work, which takes time in proportion to a collection or a body (a full diff, the decoding of a
/// large body, a view's first evaluation), running at a lower scheduling priority (nice 10) than the event loops,
/// the journal's threads and Dispatch's pool. When the CPUs are all busy, the kernel then gives most of their time
/// to small writes and reads, and a collection replaced back to back takes what is left, instead of halving the
/// throughput of every other collection on a two-CPU machine. When they are not, bulk work runs at full speed.
///
/// The priority is the thread's own (Linux keeps a nice value per thread), set once when the thread starts: an
/// unprivileged process may lower a thread's priority but never raise it again, so these threads are kept apart
/// from Dispatch's pool rather than lowered while they run bulk work. Started as needed, up to `limit`, and kept
/// for the life of the process.
final class BulkThreads: Sendable {
    /// The process's pool, one thread per CPU it may use.
    static let shared = BulkThreads(limit: CPUBudget.current().loops)

    /// The nice value of every thread of the pool.
    static let niceness: Int32 = 10

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
        case .start: startThread { [self] in loop() }
        }
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
