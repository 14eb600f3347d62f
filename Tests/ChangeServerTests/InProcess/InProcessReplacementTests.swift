import Model
import Synchronization
import Testing

@testable import ChangeServer

/// A replacement is made on copies of the content and of its views outside their locks, and swapped in under the
/// collection's lock (`Executor.prepareReplacement`, `commitReplacement`): reads and listings never wait for it.
@Suite struct InProcessReplacementTests {
    /// Items `i<n>` whose data keeps every other one in the view (`{"keep":…,"n":…}`).
    static func items(_ ids: ClosedRange<Int>, plus: Int = 0) -> [Item] {
        ids.map { Item(id: "i\($0)", data: JSONData(canonical: #"{"keep":\#($0 % 2 == 0),"n":\#($0 + plus)}"#)) }
    }

    static let first = [Section(id: "s", items: items(1...5))]
    static let second = [
        Section(id: "s", items: items(3...8, plus: 1)), Section(id: "t", items: items(20...21)),
    ]
    /// A view of the kept items, by `n` descending.
    static let view = JournalRecord.defineView(
        view: "v", epoch: "v",
        definition: JSONData(
            canonical: #"{"filter":{"eq":true,"field":"/keep"},"#
                + #""sortBy":[{"field":"/n","order":"desc"}],"source":"c"}"#),
        conditions: .none)

    /// Two executors holding the same collection (and view): one to replace in two halves, one to compare with,
    /// replaced as before there were halves (`replacedUnderTheLock`).
    static func twins(withView: Bool = false) throws -> (split: Executor, whole: Executor, entry: CollectionEntry) {
        let split = Executor(registry: Registry(), limits: HistoryLimits())
        let whole = Executor(registry: Registry(), limits: HistoryLimits())
        for executor in [split, whole] {
            _ = executor.execute(.put(collection: "c", epoch: "e", sections: first, conditions: .none))
            if withView { _ = executor.execute(view) }
        }
        return (split, whole, try #require(split.registry.entry("c")))
    }

    static func snapshot(_ executor: Executor) -> [Section]? {
        executor.registry.entry("c")?.content.withLock { $0.snapshot() }
    }

    static func viewSnapshot(_ executor: Executor) -> [Section]? {
        executor.views.entry("v")?.live.withLock { $0.snapshot() }
    }

    static func put(_ sections: [Section]) -> JournalRecord {
        .put(collection: "c", epoch: "e", sections: sections, conditions: .none)
    }

    /// `sections` replacing the content of "c" in one step under its lock, its views updated under it: the way
    /// replacements were made before they had two halves, and still are when the first half is out of date.
    static func replacedUnderTheLock(_ executor: Executor, with sections: [Section]) throws -> Executor.Outcome {
        let entry = try #require(executor.registry.entry("c"))
        do throws(Rejection) {
            return try executor.commitReplacement(nil, of: entry, with: sections, .none)
        } catch {
            return .rejected(error)
        }
    }

    /// What `outcome` committed, and what the same replacement of "c" with `second` commits under the lock on
    /// `whole`; nil, with an issue recorded, when either did not commit.
    static func committed(_ outcome: Executor.Outcome, _ whole: Executor) throws -> (
        (Changeset, [Executor.ViewChange]), (Changeset, [Executor.ViewChange])
    )? {
        guard case .committed(_, let changeset, _, let views) = outcome,
            case .committed(_, let expected, _, let expectedViews) = try replacedUnderTheLock(whole, with: second)
        else {
            Issue.record("not committed: \(outcome)")
            return nil
        }
        return ((changeset, views), (expected, expectedViews))
    }

    /// A view with another definition: every item, by `n`, at most 1,000 (the same content as `plain`).
    static func redefinition(limit: Bool) -> JournalRecord {
        .defineView(
            view: "v", epoch: "v",
            definition: JSONData(
                canonical: (limit ? #"{"limit":1000,"# : "{") + #""sortBy":[{"field":"/n"}],"source":"c"}"#),
            conditions: .none)
    }

    /// While the replacement is prepared, through `execute`, the collection and its view are at their old versions
    /// and their locks are free; then the replacement is committed with the view's changeset, as a replacement
    /// under the lock commits them.
    @Test(arguments: [false, true]) func aReplacementIsPreparedWithoutTheLocks(withView: Bool) throws {
        let (split, whole, entry) = try Self.twins(withView: withView)
        let before = entry.content.withLock { $0.version }
        let seen = Mutex<[(collection: Version?, views: [Version?])]>([])
        let observer: @Sendable (Executor.Prepared) -> Void = { prepared in
            guard case .replacement(let entry, let views) = prepared else { return }
            let collection = entry.content.withLockIfAvailable { $0.version }
            let versions = views.map { view in view.live.withLockIfAvailable { $0.version } }
            seen.withLock { $0.append((collection, versions)) }
        }
        let outcome = Executor.$preparedObserver.withValue(observer) { split.execute(Self.put(Self.second)) }
        let observed = seen.withLock { $0 }
        #expect(observed.count == 1, "prepared once, in two halves")
        #expect(observed.first?.collection == before, "free, and not yet replaced")
        #expect(observed.first?.views.count == (withView ? 1 : 0))
        #expect(observed.first?.views.allSatisfy { $0 != nil } == true, "the view's lock is free")

        guard case .committed(_, let changeset, let created, let views) = outcome,
            case .committed(_, let expected, _, let expectedViews) = try Self.replacedUnderTheLock(
                whole, with: Self.second)
        else {
            Issue.record("not committed: \(outcome)")
            return
        }
        #expect(!created)
        #expect(changeset == expected)
        #expect(changeset.from == before && changeset.to == before.next)
        #expect(Self.snapshot(split) == Self.second)
        #expect(views.map(\.changeset) == expectedViews.map(\.changeset))
        #expect(views.count == (withView ? 1 : 0))
        #expect(Self.viewSnapshot(split) == Self.viewSnapshot(whole))
        if withView {
            #expect(Self.viewSnapshot(split)?.first?.items.map(\.id) == ["i20", "i8", "i6", "i4"])
        }
    }

    /// Should the collection change between the halves (its lane keeps that from happening), the replacement is
    /// made again from the content as it is: the write in between is neither lost nor given a second version.
    @Test(arguments: [false, true]) func aWriteBetweenTheHalvesIsKept(withView: Bool) throws {
        let (split, whole, entry) = try Self.twins(withView: withView)
        let prepared = try #require(split.prepareReplacement(of: entry, with: Self.second, .none))
        let upsert = JournalRecord.upsert(
            collection: "c", id: "i20", data: JSONData(canonical: #"{"keep":true,"n":0}"#), section: .id("s"),
            index: 0, conditions: .none)
        for executor in [split, whole] {
            guard case .committed = executor.execute(upsert) else {
                Issue.record("the upsert was not committed")
                return
            }
        }
        let between = entry.content.withLock { $0.version }

        let outcome = try split.commitReplacement(prepared, of: entry, with: Self.second, .none)
        guard let ((changeset, views), (expected, expectedViews)) = try Self.committed(outcome, whole) else { return }
        #expect(changeset == expected)
        #expect(changeset.from == between && changeset.to == between.next)
        #expect(Self.snapshot(split) == Self.second)
        #expect(views.map(\.changeset) == expectedViews.map(\.changeset))
        #expect(Self.viewSnapshot(split) == Self.viewSnapshot(whole))
    }

    /// What the first half made is what the second swaps in (here, to tell it apart, the second is given other
    /// sections, which it would replace the content with if it made the replacement again).
    @Test func thePreparedResultIsSwappedIn() throws {
        let (split, _, entry) = try Self.twins(withView: true)
        let prepared = try #require(split.prepareReplacement(of: entry, with: Self.second, .none))
        let other = [Section(id: "other")]
        guard case .committed = try split.commitReplacement(prepared, of: entry, with: other, .none) else {
            Issue.record("not committed")
            return
        }
        #expect(Self.snapshot(split) == Self.second)
    }

    /// Should the collection's views change between the halves (their records run on its lane too, so they do
    /// not), the replacement is made again under the lock: a view defined meanwhile is updated, and one
    /// redefined with the same content (so at the same version) keeps its new definition.
    @Test(arguments: ["a view defined", "a view redefined, same content", "a view deleted"])
    func viewsChangedBetweenTheHalvesAreKept(change: String) throws {
        let (split, whole, entry) = try Self.twins(withView: true)
        for executor in [split, whole] { _ = executor.execute(Self.redefinition(limit: false)) }
        let prepared = try #require(split.prepareReplacement(of: entry, with: Self.second, .none))
        let record: JournalRecord =
            switch change {
            case "a view defined":
                .defineView(
                    view: "w", epoch: "w", definition: JSONData(canonical: #"{"source":"c"}"#), conditions: .none)
            case "a view redefined, same content": Self.redefinition(limit: true)
            default: .deleteView(view: "v", conditions: .none)
            }
        for executor in [split, whole] { _ = executor.execute(record) }

        let outcome = try split.commitReplacement(prepared, of: entry, with: Self.second, .none)
        guard let ((changeset, views), (expected, expectedViews)) = try Self.committed(outcome, whole) else { return }
        #expect(changeset == expected)
        #expect(Set(views.map(\.entry.name)) == Set(expectedViews.map(\.entry.name)))
        for name in ["v", "w"] {
            let mine = split.views.entry(name)?.live.withLock { ($0.definition, $0.version, $0.snapshot()) }
            let theirs = whole.views.entry(name)?.live.withLock { ($0.definition, $0.version, $0.snapshot()) }
            #expect(mine?.0 == theirs?.0 && mine?.1 == theirs?.1 && mine?.2 == theirs?.2, "\(change): \(name)")
        }
    }

    /// A view is redefined on a copy: while the new definition is evaluated, the view's lock is free and its
    /// version the old one; the result is what a definition made at once gives.
    @Test func aViewIsRedefinedWithoutItsLock() throws {
        let (split, whole, _) = try Self.twins(withView: true)
        let entry = try #require(split.views.entry("v"))
        let before = entry.live.withLock { $0.version }
        let redefinition = Self.redefinition(limit: false)
        let seen = Mutex<[Version?]>([])
        let observer: @Sendable (Executor.Prepared) -> Void = { prepared in
            guard case .redefinition(let view) = prepared else { return }
            seen.withLock { $0.append(view.live.withLockIfAvailable { $0.version }) }
        }
        let outcome = Executor.$preparedObserver.withValue(observer) { split.execute(redefinition) }
        #expect(seen.withLock { $0 } == [before], "evaluated once, without the view's lock")
        guard case .viewCommitted(_, let changeset, let created) = outcome,
            case .viewCommitted(_, let expected, _) = whole.execute(redefinition)
        else {
            Issue.record("not committed: \(outcome)")
            return
        }
        #expect(!created)
        #expect(changeset == expected && changeset.from == before)
        #expect(Self.viewSnapshot(split) == Self.viewSnapshot(whole))
        #expect(Self.viewSnapshot(split)?.first?.items.map(\.id) == ["i1", "i2", "i3", "i4", "i5"])
    }

    /// A replacement with the same content keeps the version; one the model refuses, or whose conditions fail,
    /// changes nothing.
    @Test func anUnchangedOrRefusedReplacementKeepsTheVersion() throws {
        let (split, _, entry) = try Self.twins(withView: true)
        let before = entry.content.withLock { $0.version }
        guard case .unchanged(_, let same) = split.execute(Self.put(Self.first)) else {
            Issue.record("the same content is not unchanged")
            return
        }
        #expect(same.isEmpty && same.from == before && same.to == before)

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
