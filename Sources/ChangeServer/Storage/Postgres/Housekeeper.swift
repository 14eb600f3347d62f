import Dispatch
import Synchronization

/// Runs the journal's background work on the database (snapshots, compaction, purges of deleted collections) one
/// job at a time, in the order handed in, on one thread with one connection: opened when a job comes, kept while
/// more wait, and closed once none does. So a server holds at most three connections (writer, follower and this
/// one), however many collections need a snapshot at once; a thread and a connection per job could take every
/// connection PostgreSQL allows, and the other servers' writes with them. A snapshot's encoding runs here too, one
/// at a time, so that many large snapshots never hold many encodings in memory together.
final class Housekeeper: Sendable {
    /// One piece of work, given the connection; it handles its own failures. A job that throws leaves the
    /// connection to be closed (it may be inside a transaction that failed) and the next job opens a new one. A job
    /// that found a connection kept from an earlier job broken (the database restarted meanwhile) runs once more on
    /// a new one, so a job must be safe to run twice.
    typealias Job = @Sendable (PGConnection) throws(StorageError) -> Void

    private struct Entry {
        let job: Job
        /// Told when the job could not run or threw.
        let failed: @Sendable (StorageError) -> Void
    }

    private struct State {
        var queue: [Entry] = []
        var isRunning = false
        var isClosing = false
    }

    private let url: String
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let thread = Mutex<JoinableThread?>(nil)

    init(url: String) {
        self.url = url
        thread.withLock { $0 = JoinableThread { [self] in loop() } }
    }

    /// Queues `job` behind those handed in before; `failed` is called instead (on the housekeeper's thread) when no
    /// connection could be made for it or for a job before it, or with what it threw. A job handed in after `close`
    /// is dropped.
    func run(_ job: @escaping Job, failed: @escaping @Sendable (StorageError) -> Void) {
        let taken = state.withLock { state in
            guard !state.isClosing else { return false }
            state.queue.append(Entry(job: job, failed: failed))
            return true
        }
        if taken { wake.signal() }
    }

    /// Jobs handed in and not finished (the running one included): a backlog that grows says snapshots come
    /// faster than they are written.
    var backlog: Int { state.withLock { $0.queue.count + ($0.isRunning ? 1 : 0) } }

    /// Drops the jobs not started and waits until `deadline` (`MonotonicClock.now()`) for the running one; false
    /// when it is still running then (a database that does not answer, or a large snapshot still being encoded),
    /// the thread left behind.
    func close(until deadline: Int64) -> Bool {
        state.withLock { state in
            state.isClosing = true
            state.queue = []
        }
        wake.signal()
        let running = thread.withLock { thread in
            defer { thread = nil }
            return thread
        }
        return running?.join(within: Int(max(0, deadline - MonotonicClock.now()))) ?? true
    }

    private func loop() {
        var connection: PGConnection?
        while true {
            let next = state.withLock { state in
                state.isRunning = !state.queue.isEmpty
                return state.isRunning ? state.queue.removeFirst() : nil
            }
            guard let entry = next else {
                connection = nil
                if state.withLock({ $0.isClosing }) { return }
                wake.wait()
                continue
            }
            connection = run(entry, on: connection)
        }
    }

    /// Runs `entry` on `kept` (the connection of the jobs before, if any), or on a new connection, and returns the
    /// connection to keep for the next job (nil after a failure).
    private func run(_ entry: Entry, on kept: PGConnection?) -> PGConnection? {
        if let kept {
            do throws(StorageError) {
                try entry.job(kept)
                return kept
            } catch {
                guard kept.isBroken else {
                    entry.failed(error)
                    return nil
                }
                // The database ended the connection after the last job (a restart, a failover): the job did not
                // fail for its own sake, so it runs once more on a new connection.
            }
        }
        let fresh: PGConnection
        do throws(StorageError) {
            fresh = try PGConnection(url, role: "housekeeper")
        } catch {
            // The database is unreachable: the jobs waiting behind this one would each wait for their own
            // connection attempt (up to 5 s), so they fail now too, and are tried again as their owners do.
            let waiting = state.withLock { state in
                defer { state.queue = [] }
                return state.queue
            }
            for failing in [entry] + waiting { failing.failed(error) }
            return nil
        }
        do throws(StorageError) {
            try entry.job(fresh)
            return fresh
        } catch {
            entry.failed(error)
            return nil
        }
    }
}
