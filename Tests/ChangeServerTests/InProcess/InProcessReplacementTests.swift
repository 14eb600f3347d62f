import Model
import Testing

@testable import ChangeServer

/// A replacement is diffed on a copy of the content outside its collection's lock, and swapped in under it
/// (`Executor.prepareReplacement`, `commitReplacement`): reads and listings never wait for the diff.
@Suite struct InProcessReplacementTests {
    static func items(_ ids: ClosedRange<Int>) -> [Item] {
        ids.map { Item(id: "i\($0)", data: JSONData(canonical: "\($0)")) }
    }

    static let first = [Section(id: "s", items: items(1...5))]
    static let second = [Section(id: "s", items: items(3...8)), Section(id: "t", items: items(20...21))]

    /// Two executors holding the same collection: one to replace in two halves, one to compare with.
    static func twins() throws -> (split: Executor, whole: Executor, entry: CollectionEntry) {
        let split = Executor(registry: Registry(), limits: HistoryLimits())
        let whole = Executor(registry: Registry(), limits: HistoryLimits())
        for executor in [split, whole] {
            _ = executor.execute(.put(collection: "c", epoch: "e", sections: first, conditions: .none))
        }
        return (split, whole, try #require(split.registry.entry("c")))
    }

    static func snapshot(_ executor: Executor) -> [Section]? {
        executor.registry.entry("c")?.content.withLock { $0.snapshot() }
    }

    /// Between the halves the collection is as it was, and its lock is free; the second half commits what a
    /// replacement under the lock commits.
    @Test func theDiffIsMadeOnACopyAndSwappedIn() throws {
        let (split, whole, entry) = try Self.twins()
        let before = entry.content.withLock { $0.version }
        let prepared = try #require(split.prepareReplacement(of: entry, with: Self.second, .none))
        #expect(entry.content.withLockIfAvailable { $0.version } == before)
        #expect(Self.snapshot(split) == Self.first)

        let outcome = try split.commitReplacement(prepared, of: entry, with: Self.second, .none)
        guard case .committed(_, let changeset, let created, _) = outcome,
            case .committed(_, let expected, _, _) = whole.execute(
                .put(collection: "c", epoch: "e", sections: Self.second, conditions: .none))
        else {
            Issue.record("not committed: \(outcome)")
            return
        }
        #expect(!created)
        #expect(changeset == expected)
        #expect(changeset.from == before && changeset.to == before.next)
        #expect(Self.snapshot(split) == Self.second)
        #expect(entry.content.withLock { $0.changes(since: before) } == expected)
    }

    /// Should the collection change between the halves (its lane keeps that from happening), the replacement is
    /// made again from the content as it is: the write in between is neither lost nor given a second version.
    @Test func aWriteBetweenTheHalvesIsKept() throws {
        let (split, whole, entry) = try Self.twins()
        let prepared = try #require(split.prepareReplacement(of: entry, with: Self.second, .none))
        let upsert = JournalRecord.upsert(
            collection: "c", id: "i20", data: JSONData(canonical: "0"), section: .id("s"), index: 0,
            conditions: .none)
        for executor in [split, whole] {
            guard case .committed = executor.execute(upsert) else {
                Issue.record("the upsert was not committed")
                return
            }
        }
        let between = entry.content.withLock { $0.version }

        let outcome = try split.commitReplacement(prepared, of: entry, with: Self.second, .none)
        guard case .committed(_, let changeset, _, _) = outcome,
            case .committed(_, let expected, _, _) = whole.execute(
                .put(collection: "c", epoch: "e", sections: Self.second, conditions: .none))
        else {
            Issue.record("not committed: \(outcome)")
            return
        }
        #expect(changeset == expected)
        #expect(changeset.from == between && changeset.to == between.next)
        #expect(Self.snapshot(split) == Self.second)
    }

    /// A replacement the model refuses, or whose conditions fail, changes nothing.
    @Test func aRefusedReplacementChangesNothing() throws {
        let (split, _, entry) = try Self.twins()
        let before = entry.content.withLock { $0.version }
        let duplicate = [Section(id: "s", items: [Item(id: "x"), Item(id: "x")])]
        let prepared = split.prepareReplacement(of: entry, with: duplicate, .none)
        #expect(prepared != nil, "the model's refusal is found in the first half")
        let refused = #expect(throws: Rejection.self) {
            try split.commitReplacement(prepared, of: entry, with: duplicate, .none)
        }
        guard case .model(let error) = refused else {
            Issue.record("not refused by the model: \(String(describing: refused))")
            return
        }
        #expect(error.code == .duplicateID)

        let stale = JournalRecord.Conditions(ifMatch: "\"e.99\"")
        #expect(split.prepareReplacement(of: entry, with: Self.second, stale) == nil, "no diff when refused")
        let failed = #expect(throws: Rejection.self) {
            try split.commitReplacement(nil, of: entry, with: Self.second, stale)
        }
        guard case .preconditionFailed = failed else {
            Issue.record("a stale If-Match is not refused: \(String(describing: failed))")
            return
        }
        #expect(entry.content.withLock { $0.version } == before)
        #expect(Self.snapshot(split) == Self.first)
    }
}
