import Dispatch
import Foundation
import Model
import Synchronization
import Testing

@testable import ChangeServer

/// `Lanes`: work for one name runs in the order handed in and never two at a time; work for several names runs once
/// all their lanes reached it, alone on each of them; bulk work the same, at the lower priority of `BulkThreads`.
@Suite struct InProcessLanesTests {
    @Test(arguments: 0..<5)
    func everyLaneSeesItsWorkInOrderAndAlone(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let names = ["a", "b", "c", "d", "e"]
        let pieces: [Set<String>] = (0..<2000).map { _ in
            let count = Int.random(in: 0..<10, using: &random) == 0 ? Int.random(in: 2...3, using: &random) : 1
            return Set((0..<count).map { _ in names[Int.random(in: 0..<names.count, using: &random)] })
        }
        let lanes = Lanes()
        let log = LaneLog()
        let group = DispatchGroup()
        var inPlace = 0
        var bulkPieces = 0
        for (index, piece) in pieces.enumerated() {
            // Every 50th single-lane piece waits for the lanes to be idle, and must then run in place.
            let mustRunHere = index % 50 == 0 && piece.count == 1
            if mustRunHere, let name = piece.first {
                #expect(group.wait(timeout: .now() + 30) == .success)
                #expect(Self.awaitIdle(lanes, name))
            }
            let isBulk = !mustRunHere && index % 3 != 0 && Int.random(in: 0..<4, using: &random) == 0
            bulkPieces += isBulk ? 1 : 0
            group.enter()
            let work: @Sendable () -> Void = {
                log.begin(index, piece, isBulk: isBulk)
                log.end(piece)
                group.leave()
            }
            if piece.count == 1, let name = piece.first {
                // Some single-lane work runs in place (on this thread) when its lane is idle.
                if mustRunHere {
                    #expect(Self.runInPlace(lanes, name, work), "seed \(seed), piece \(index)")
                    inPlace += 1
                } else if index % 3 == 0 {
                    inPlace += Self.runInPlace(lanes, name, work) ? 1 : 0
                } else {
                    lanes.run(name, bulk: isBulk, work)
                }
            } else {
                lanes.run(piece, bulk: isBulk, work)
            }
        }
        #expect(group.wait(timeout: .now() + 30) == .success, "seed \(seed)")
        #expect(log.overlaps == 0, "seed \(seed): work ran on a lane that was busy")
        #expect(log.wrongPriorities == 0, "seed \(seed): bulk work at normal priority, or the reverse")
        #expect(bulkPieces > 200, "seed \(seed): only \(bulkPieces) bulk pieces")
        for name in names {
            let expected = pieces.indices.filter { pieces[$0].contains(name) }
            #expect(log.order[name] ?? [] == expected, "seed \(seed), lane \(name)")
        }
        #expect(pieces.filter { $0.count > 1 }.count > 100)
        #expect(inPlace >= 20, "seed \(seed): only \(inPlace) pieces ran in place")
    }

    /// `work` in place when the lane of `name` is idle, else on the lane: true when it ran here.
    static func runInPlace(_ lanes: Lanes, _ name: String, _ work: @escaping @Sendable () -> Void) -> Bool {
        lanes.runInPlaceIfIdle(
            name,
            attempt: {
                work()
                return true
            }, otherwise: work)
    }

    /// An attempt in place that gives up leaves its work to the lane: it runs there (not on the caller), after
    /// what was handed to the lane meanwhile, and before what is handed after.
    @Test func workGivenUpInPlaceRunsOnTheLaneInTurn() {
        let lanes = Lanes()
        let order = Mutex<[String]>([])
        let done = DispatchGroup()
        let caller = pthread_self()
        done.enter()
        let ranHere = lanes.runInPlaceIfIdle(
            "a",
            attempt: {
                // Handed from another thread while the attempt holds the lane.
                let handed = DispatchSemaphore(value: 0)
                done.enter()
                DispatchQueue.global().async {
                    lanes.run("a") {
                        order.withLock { $0.append("handed meanwhile") }
                        done.leave()
                    }
                    handed.signal()
                }
                handed.wait()
                return false
            },
            otherwise: {
                #expect(pthread_equal(pthread_self(), caller) == 0, "given up: it runs on the lane")
                order.withLock { $0.append("given up") }
                done.leave()
            })
        done.enter()
        lanes.run("a") {
            order.withLock { $0.append("later") }
            done.leave()
        }
        #expect(!ranHere)
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(order.withLock { $0 } == ["handed meanwhile", "given up", "later"])
    }

    /// Waits (at most 10 s) until the lane of `name` runs a piece of no work in place: a piece leaves a group from
    /// inside its work, and counts itself finished just after.
    static func awaitIdle(_ lanes: Lanes, _ name: String) -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if runInPlace(lanes, name, {}) { return true }
            sched_yield()
        }
        return false
    }

    /// Work run in place holds its lane: work handed to the lane from another thread meanwhile waits for it.
    @Test func workHandedToALaneRunningInPlaceWaitsForIt() {
        let lanes = Lanes()
        let order = Mutex<[String]>([])
        let queuedRan = DispatchSemaphore(value: 0)
        let caller = pthread_self()
        let ranHere = Self.runInPlace(lanes, "a") {
            #expect(pthread_equal(pthread_self(), caller) != 0, "in-place work runs on the calling thread")
            let handed = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                lanes.run("a") {
                    order.withLock { $0.append("queued") }
                    queuedRan.signal()
                }
                handed.signal()
            }
            handed.wait()
            // The queued work must not run while this does; there is no event to wait for, only a while.
            #expect(queuedRan.wait(timeout: .now() + .milliseconds(200)) == .timedOut)
            order.withLock { $0.append("in place") }
        }
        #expect(ranHere)
        #expect(queuedRan.wait(timeout: .now() + 10) == .success)
        #expect(order.withLock { $0 } == ["in place", "queued"])
    }

    /// A lane with work queued or running takes in-place work in its turn, on the lane, not on the caller.
    @Test func aBusyLaneTakesInPlaceWorkInTurn() {
        let lanes = Lanes()
        let order = Mutex<[String]>([])
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        lanes.run("a") {
            started.signal()
            release.wait()
            order.withLock { $0.append("first") }
        }
        started.wait()
        let caller = pthread_self()
        let ranHere = Self.runInPlace(lanes, "a") {
            #expect(pthread_equal(pthread_self(), caller) == 0)
            order.withLock { $0.append("second") }
            done.signal()
        }
        #expect(!ranHere)
        #expect(Self.runInPlace(lanes, "b") { order.withLock { $0.append("other lane") } })
        release.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(order.withLock { $0 } == ["other lane", "first", "second"])
    }
}

private final class LaneLog: @unchecked Sendable {
    // @unchecked: everything is guarded by `lock`.
    private let lock = NSLock()
    private var busy = Set<String>()
    private(set) var order: [String: [Int]] = [:]
    private(set) var overlaps = 0
    /// Pieces that ran at `BulkThreads.niceness` without being bulk, or the reverse.
    private(set) var wrongPriorities = 0

    func begin(_ index: Int, _ names: Set<String>, isBulk: Bool) {
        let isAtBulkPriority = currentNiceness() == BulkThreads.niceness
        lock.withLock {
            if BulkThreads.isLower && isAtBulkPriority != isBulk { wrongPriorities += 1 }
            for name in names {
                if !busy.insert(name).inserted { overlaps += 1 }
                order[name, default: []].append(index)
            }
        }
        usleep(UInt32.random(in: 0..<20))
    }

    func end(_ names: Set<String>) {
        lock.withLock { busy.subtract(names) }
    }
}

/// The calling thread's nice value (Linux keeps one per thread).
func currentNiceness() -> Int32 {
    getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
}
