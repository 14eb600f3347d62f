import Dispatch
import Foundation
import Glibc
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// `Housekeeper` without a database (the one with a database: `LivePostgresTests.snapshotsAtOnceShareOneConnection`).
@Suite struct InProcessHousekeeperTests {
    /// When no connection can be made, the job and every job waiting behind it fail together, in order, and none
    /// of them runs: against a listener that never answers, five jobs take one connection timeout (2 s), not five.
    /// A job handed in later tries to connect again.
    @Test func jobsFailTogetherWhileTheDatabaseDoesNotAnswer() throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let housekeeper = Housekeeper(url: "postgresql://postgres@127.0.0.1:\(silent.port)/none?connect_timeout=2")
        let outcomes = Mutex<[String]>([])
        let done = DispatchGroup()
        let started = Date()
        for index in 0..<5 {
            done.enter()
            housekeeper.run { _ throws(StorageError) in
                outcomes.withLock { $0.append("ran \(index)") }
                done.leave()
            } failed: { _ in
                outcomes.withLock { $0.append("failed \(index)") }
                done.leave()
            }
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(outcomes.withLock { $0 } == (0..<5).map { "failed \($0)" })
        #expect(Date().timeIntervalSince(started) < 6, "one connection timeout for the five, not one each")
        done.enter()
        housekeeper.run { _ throws(StorageError) in
            done.leave()
        } failed: { _ in
            outcomes.withLock { $0.append("failed again") }
            done.leave()
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(outcomes.withLock { $0.last } == "failed again")
        #expect(housekeeper.close(until: MonotonicClock.now() + 5000))
    }

    /// `close` drops the jobs not started (neither run nor failed: a later server makes their snapshots and
    /// purges), waits for the one under way, and a job handed in after it is dropped too.
    @Test func closeDropsTheJobsNotStarted() throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let housekeeper = Housekeeper(url: "postgresql://postgres@127.0.0.1:\(silent.port)/none?connect_timeout=2")
        let outcomes = Mutex<[String]>([])
        housekeeper.run { _ throws(StorageError) in
            outcomes.withLock { $0.append("ran 0") }
        } failed: { _ in
            outcomes.withLock { $0.append("failed 0") }
        }
        // The first job is under way (its connection attempt waits for the listener) before the others come.
        #expect(waitUntil(timeout: 10) { silent.hasPendingConnection })
        for index in 1..<3 {
            housekeeper.run { _ throws(StorageError) in
                outcomes.withLock { $0.append("ran \(index)") }
            } failed: { _ in
                outcomes.withLock { $0.append("failed \(index)") }
            }
        }
        #expect(housekeeper.backlog == 3, "the job under way and the two behind it")
        #expect(housekeeper.close(until: MonotonicClock.now() + 10_000))
        #expect(housekeeper.backlog == 0)
        housekeeper.run { _ throws(StorageError) in
            outcomes.withLock { $0.append("ran 3") }
        } failed: { _ in
            outcomes.withLock { $0.append("failed 3") }
        }
        usleep(100_000)
        #expect(outcomes.withLock { $0 } == ["failed 0"])
    }
}

/// A loopback TCP listener that never accepts: the kernel completes the handshake, and nothing ever answers.
private struct SilentListener {
    let port: Int
    private let descriptor: Int32

    init() throws {
        (descriptor, port) = try listeningOnLoopback()
    }

    /// Whether a connection is waiting in the backlog (the kernel completed its handshake).
    var hasPendingConnection: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1
    }

    func close() { Glibc.close(descriptor) }
}
