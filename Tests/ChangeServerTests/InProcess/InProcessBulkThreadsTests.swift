import Dispatch
import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// `BulkThreads`: everything handed in runs, at the pool's lower priority, up to `limit` pieces at once.
@Suite struct InProcessBulkThreadsTests {
    @Test func workRunsAtALowerPriorityUpToTheLimitAtOnce() {
        let threads = BulkThreads(limit: 2)
        let running = Mutex((now: 0, most: 0))
        let niceness = Mutex<[Int32]>([])
        let release = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        for _ in 0..<5 {
            done.enter()
            threads.run {
                niceness.withLock { $0.append(currentNiceness()) }
                running.withLock { $0 = ($0.now + 1, max($0.most, $0.now + 1)) }
                release.wait()
                running.withLock { $0.now -= 1 }
                done.leave()
            }
        }
        // Two pieces start and hold their threads; the other three wait for one of them.
        #expect(waitUntil(timeout: 10) { running.withLock { $0.now } == 2 })
        for _ in 0..<5 { release.signal() }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(running.withLock { $0.most } == 2)
        #expect(niceness.withLock { $0 } == Array(repeating: BulkThreads.niceness, count: 5))
    }

    /// A pool's idle threads wake for later work.
    @Test func idleThreadsTakeLaterWork() {
        let threads = BulkThreads(limit: 1)
        for round in 0..<20 {
            let done = DispatchSemaphore(value: 0)
            threads.run { done.signal() }
            #expect(done.wait(timeout: .now() + 10) == .success, "round \(round)")
        }
    }
}

/// `LaneRouter.hand`: records whose cost grows with their collection (or with their own size) go to the lanes as
/// bulk work; small records do not.
@Suite struct InProcessBulkRecordTests {
    @Test func recordsWhoseCostGrowsWithTheirCollectionAreBulk() {
        let data = JSONData(canonical: "1")
        let big = JSONData(canonical: "\"" + String(repeating: "x", count: LaneRouter.lightBytes) + "\"")
        let definition = JSONData(canonical: #"{"source":"a"}"#)
        let cases: [(JournalRecord, isBulk: Bool)] = [
            (.put(collection: "a", epoch: "e", sections: [], conditions: .none), true),
            (.delete(collection: "a", conditions: .none), true),
            (.defineView(view: "v", epoch: "e", definition: definition, conditions: .none), true),
            (.ops(collection: "a", ops: [.deleteSections([.index(0)])], conditions: .none), true),
            (.ops(collection: "a", ops: [.moveSection(.index(0), to: 1)], conditions: .none), true),
            (.upsert(collection: "a", id: "i", data: big, section: nil, index: nil, conditions: .none), true),
            (.upsert(collection: "a", id: "i", data: data, section: nil, index: nil, conditions: .none), false),
            (.ops(collection: "a", ops: [.deleteItems([.id("i")])], conditions: .none), false),
            (.deleteView(view: "v", conditions: .none), false),
        ]
        let executor = Executor(registry: Registry(), limits: HistoryLimits(versions: 10))
        let router = LaneRouter(collections: executor.registry, views: executor.views)
        let lanes = Lanes()
        for (record, isBulk) in cases {
            let niceness = Mutex<Int32?>(nil)
            let done = DispatchSemaphore(value: 0)
            router.hand(
                record, bytes: RecordCodec.encode(record).count, to: lanes, inPlace: false, attempt: { false },
                otherwise: {
                    niceness.withLock { $0 = currentNiceness() }
                    done.signal()
                })
            #expect(done.wait(timeout: .now() + 10) == .success)
            #expect(
                !BulkThreads.isLower || (niceness.withLock { $0 } == BulkThreads.niceness) == isBulk, "\(record)")
        }
    }
}

/// `App.submit`: a large body is decoded as bulk work, a small one on the calling thread (the event loop).
@Suite struct InProcessBulkDecodingTests {
    @Test(arguments: [App.largeBodyBytes, App.largeBodyBytes - 1])
    func largeBodiesAreDecodedAtBulkPriority(bodyBytes: Int) throws {
        let server = try InProcessServer()
        let decodedAt = Mutex<Int32?>(nil)
        let connection = RecordingConnection()
        let request = Request(
            method: "PUT", path: "/v1/collections/big", headers: [("content-type", "application/json")],
            body: Array(repeating: UInt8(ascii: " "), count: bodyBytes))
        _ = try server.app.submit(request, "big", connection) { _ throws(HTTPError) in
            decodedAt.withLock { $0 = currentNiceness() }
            return .put(collection: "big", epoch: "e1", sections: [], conditions: .none)
        }
        #expect(connection.wait().status == 201)
        let isLarge = bodyBytes >= App.largeBodyBytes
        #expect(!BulkThreads.isLower || (decodedAt.withLock { $0 } == BulkThreads.niceness) == isLarge)
    }
}

/// `Committer.applyRemote` (records of other servers on a shared PostgreSQL): bulk work as a local record of the
/// same kind and size would be.
@Suite struct InProcessRemoteApplyTests {
    @Test func remoteRecordsAreBulkByKindAndSize() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let journal = try FileJournal(
            directory: try DataDirectory.open(path), segment: 1, size: 0, bytesSinceSnapshot: 0, policy: .never,
            metrics: Metrics(), logger: Logger(level: .critical))
        defer { journal.close() }
        let published = Mutex<[Int32]>([])
        let committer = Committer(
            executor: Executor(registry: Registry(), limits: HistoryLimits(versions: 10)), journal: journal,
            lanes: Lanes(), snapshots: nil, metrics: Metrics()
        ) { _ in published.withLock { $0.append(currentNiceness()) } }
        let big = JSONData(canonical: "\"" + String(repeating: "x", count: LaneRouter.lightBytes) + "\"")
        let cases: [(JournalRecord, isBulk: Bool)] = [
            (.put(collection: "a", epoch: "e", sections: [Section(id: "s")], conditions: .none), true),
            (.upsert(collection: "a", id: "i", data: .null, section: nil, index: nil, conditions: .none), false),
            (.upsert(collection: "a", id: "i", data: big, section: nil, index: nil, conditions: .none), true),
            (.ops(collection: "a", ops: [.deleteItems([.id("i")])], conditions: .none), false),
            (.ops(collection: "a", ops: [.deleteSections([.index(0)])], conditions: .none), true),
        ]
        for (index, (record, isBulk)) in cases.enumerated() {
            committer.applyRemote(record, bytes: RecordCodec.encode(record).count)
            #expect(waitUntil(timeout: 10) { published.withLock { $0.count } == index + 1 }, "\(record)")
            let niceness = published.withLock { $0.last }
            #expect(!BulkThreads.isLower || (niceness == BulkThreads.niceness) == isBulk, "\(record)")
        }
    }
}
