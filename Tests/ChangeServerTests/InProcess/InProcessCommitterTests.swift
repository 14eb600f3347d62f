import Dispatch
import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

/// The commit path with the real file journal (`--fsync always`), in-process.
@Suite struct InProcessCommitterTests {
    /// Applying without waiting does what `execute` does, or nothing at all: when the collection's lock is taken,
    /// or when it feeds a view (whose lock it would have to wait for).
    @Test func applyingWithoutWaitingChangesAllOrNothing() throws {
        let executor = Executor(registry: Registry(), limits: HistoryLimits())
        let same = Executor(registry: Registry(), limits: HistoryLimits())
        for target in [executor, same] {
            _ = target.execute(.put(collection: "c", epoch: "e", sections: [Section(id: "s")], conditions: .none))
        }
        let upsert = JournalRecord.upsert(
            collection: "c", id: "i", data: JSONData(canonical: "1"), section: nil, index: nil, conditions: .none)
        let ops = JournalRecord.ops(
            collection: "c", ops: [.updateItems([Item(id: "i", data: JSONData(canonical: "2"))])], conditions: .none)
        for record in [upsert, ops] {
            guard case .committed(_, let changeset, _, _) = executor.executeWithoutWaiting(record),
                case .committed(_, let expected, _, _) = same.execute(record)
            else {
                Issue.record("not committed: \(record)")
                return
            }
            #expect(changeset == expected)
        }
        let entry = try #require(executor.registry.entry("c"))
        #expect(
            entry.content.withLock { $0.snapshot() } == same.registry.entry("c")?.content.withLock { $0.snapshot() })
        let missing = JournalRecord.upsert(
            collection: "none", id: "i", data: .null, section: nil, index: nil, conditions: .none)
        guard case .rejected(.collectionNotFound) = executor.executeWithoutWaiting(missing) else {
            Issue.record("a missing collection is refused at once")
            return
        }

        entry.whileAnotherThreadHoldsItsLock { #expect(executor.executeWithoutWaiting(upsert) == nil) }
        #expect(entry.content.withLock { $0.version } == same.registry.entry("c")?.content.withLock { $0.version })

        _ = executor.execute(
            .defineView(view: "v", epoch: "v", definition: JSONData(canonical: #"{"source":"c"}"#), conditions: .none))
        #expect(executor.executeWithoutWaiting(upsert) == nil)
        #expect(entry.content.withLock { $0.version } == same.registry.entry("c")?.content.withLock { $0.version })
        #expect(executor.executeWithoutWaiting(.delete(collection: "c", conditions: .none)) == nil)
    }

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

extension CollectionEntry {
    /// Runs `body` while another thread holds the collection's lock, as a long read would; returns once it let go.
    func whileAnotherThreadHoldsItsLock(_ body: () -> Void) {
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { [self] in
            content.withLock { _ in
                holding.signal()
                release.wait()
            }
            holding.signal()
        }
        holding.wait()
        body()
        release.signal()
        holding.wait()
    }
}
