import Dispatch
import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

/// The commit path with the real file journal (`--fsync always`), in-process.
@Suite struct InProcessCommitterTests {
    /// A read holding a collection's lock (a snapshot of a large collection holds it for a while) must not hold up
    /// the commits of other collections: a light record of that collection, which could be applied in place on the
    /// syncer thread, goes to its lane instead of waiting there for the lock. (Found in review: the first version
    /// of in-place application waited on the syncer, and every collection's commits with it.)
    @Test func aReadHoldingOneCollectionsLockDoesNotHoldUpTheOthers() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let executor = Executor(registry: Registry(), limits: HistoryLimits())
        let journal = try FileJournal(
            directory: try DataDirectory.open(path), segment: 1, size: 0, bytesSinceSnapshot: 0, policy: .always,
            metrics: Metrics(), logger: Logger(level: .critical))
        defer { journal.close() }
        let lanes = Lanes()
        let committer = Committer(
            executor: executor, journal: journal, lanes: lanes, snapshots: nil, metrics: Metrics(), publish: { _ in })
        func commit(_ record: JournalRecord) throws -> DispatchSemaphore {
            let done = DispatchSemaphore(value: 0)
            try committer.submit(record) { _ in done.signal() }
            return done
        }
        for name in ["a", "b"] {
            let made = try commit(.put(collection: name, epoch: "e", sections: [Section(id: "s")], conditions: .none))
            #expect(made.wait(timeout: .now() + 10) == .success)
            #expect(InProcessLanesTests.awaitIdle(lanes, name), "so that a's upsert could run in place")
        }
        let entry = try #require(executor.registry.entry("a"))
        let locked = DispatchSemaphore(value: 0)
        let otherCommitted = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            // The reader lets go once b committed, or after 10 s: b's commit must not need it to.
            entry.content.withLock { _ in
                locked.signal()
                _ = otherCommitted.wait(timeout: .now() + 10)
            }
            readerDone.signal()
        }
        locked.wait()
        let upsertOfA = try commit(
            .upsert(collection: "a", id: "x", data: .null, section: nil, index: nil, conditions: .none))
        let upsertOfB = try commit(
            .upsert(collection: "b", id: "y", data: .null, section: nil, index: nil, conditions: .none))
        let waited = upsertOfB.wait(timeout: .now() + 5)
        #expect(waited == .success, "b's commit waited for a reader of a")
        otherCommitted.signal()
        #expect(upsertOfA.wait(timeout: .now() + 10) == .success)
        #expect(readerDone.wait(timeout: .now() + 10) == .success)
        #expect(executor.registry.entry("b")?.content.withLock { $0.item(id: "y") } != nil)
    }
}
