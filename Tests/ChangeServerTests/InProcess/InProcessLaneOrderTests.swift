import Dispatch
import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

/// Collections commit independently: records applied on their lanes (`LaneRouter`), in parallel, leave every
/// collection and view exactly as applying them one by one in journal order does (which is what recovery does), and
/// a snapshot taken at a consistent point sees exactly the records handed in before it. Views move between sources,
/// so their records run on several lanes at once; some of them, refused for their conditions or not made durable,
/// leave the source as it was.
@Suite struct InProcessLaneOrderTests {
    private static let names = ["a", "b", "c", "d"]

    @Test(arguments: 0..<20)
    func parallelLanesEqualJournalOrder(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let records = (0..<300).map { _ in Self.randomRecord(&random) }
        // A record not made durable is handed to its lanes all the same, and applied by nobody.
        let durable = records.map { _ in Int.random(in: 0..<12, using: &random) != 0 }
        let cut = Int.random(in: 0..<records.count, using: &random)

        let sequential = Executor(registry: Registry(), limits: HistoryLimits(versions: 50))
        var accepted = 0
        var atCut: [String: VersionedCollection] = [:]
        for (index, record) in records.enumerated() {
            if index == cut { atCut = Self.contents(sequential) }
            guard durable[index] else { continue }
            if case .committed = sequential.execute(record) { accepted += 1 }
        }

        let parallel = Executor(registry: Registry(), limits: HistoryLimits(versions: 50))
        let lanes = Lanes()
        let router = LaneRouter(collections: parallel.registry, views: parallel.views)
        let group = DispatchGroup()
        let captured = CapturedContents()
        var inPlace = 0
        var surelyInPlace = 0
        for (index, record) in records.enumerated() {
            if index == cut {
                group.enter()
                lanes.visitAtConsistentPoint(
                    names: { parallel.registry.all().map(\.name) + parallel.views.sources },
                    visit: { name in
                        if let entry = parallel.registry.entry(name) {
                            captured.add(name, entry.content.withLock { $0 })
                        }
                        for view in parallel.views.views(of: name) {
                            captured.add("view:" + view.name, view.live.withLock { $0.collection })
                        }
                    },
                    then: { group.leave() })
            }
            // Handed as the syncer hands them: light records whose lane is idle are applied right here, without
            // waiting (as `Committer` does). Every 5th waits for the lanes to be idle first, so that some surely are.
            var mustRunHere = false
            if index % 5 == 2, case .upsert = record {
                #expect(group.wait(timeout: .now() + 30) == .success)
                #expect(InProcessLanesTests.awaitIdle(lanes, record.name))
                mustRunHere = parallel.views.count(of: record.name) == 0
                surelyInPlace += mustRunHere ? 1 : 0
            }
            group.enter()
            let isDurable = durable[index]
            let finish: @Sendable () -> Void = {
                switch record {
                case .defineView(let view, _, _, _, _), .deleteView(let view, _):
                    router.settle(
                        view: view, source: parallel.views.entry(view)?.live.withLock { $0.definition.source })
                default:
                    break
                }
                group.leave()
            }
            let ranHere = router.hand(record, bytes: RecordCodec.encode(record).count, to: lanes, inPlace: true) {
                if isDurable && parallel.executeWithoutWaiting(record) == nil { return false }
                finish()
                return true
            } otherwise: {
                if isDurable { _ = parallel.execute(record) }
                finish()
            }
            #expect(ranHere || !mustRunHere, "seed \(seed), record \(index)")
            if ranHere { inPlace += 1 }
        }
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(surelyInPlace >= 8, "seed \(seed): \(inPlace) applied in place")

        #expect(accepted >= 90, "seed \(seed): only \(accepted) of \(records.count) records committed")
        Self.expectEqual(Self.contents(parallel), Self.contents(sequential), seed: seed)
        Self.expectEqual(captured.all, atCut, seed: seed)
    }

    /// What runs in place on an idle lane: upserts and small ops on items; not replacements, deletions, ops on whole
    /// sections, view records, large records, nor the records of a collection that feeds a view.
    @Test func onlyLightRecordsRunInPlace() throws {
        let executor = Executor(registry: Registry(), limits: HistoryLimits())
        _ = executor.execute(.put(collection: "c", epoch: "e", sections: [Section(id: "s")], conditions: .none))
        _ = executor.execute(.put(collection: "many", epoch: "e", sections: [Section(id: "s")], conditions: .none))
        let outcome = executor.execute(
            .defineView(
                view: "v", epoch: "v", definition: JSONData(canonical: #"{"source":"many"}"#), conditions: .none))
        guard case .viewCommitted = outcome else {
            Issue.record("the view was not defined: \(outcome)")
            return
        }
        let router = LaneRouter(collections: executor.registry, views: executor.views)
        let lanes = Lanes()
        func runsInPlace(_ record: JournalRecord, inPlace: Bool = true) -> Bool {
            let done = DispatchSemaphore(value: 0)
            let ranHere = router.hand(
                record, bytes: RecordCodec.encode(record).count, to: lanes, inPlace: inPlace
            ) {
                done.signal()
                return true
            } otherwise: {
                done.signal()
            }
            #expect(done.wait(timeout: .now() + 10) == .success)
            return ranHere
        }
        let upsert = JournalRecord.upsert(
            collection: "c", id: "i", data: .null, section: nil, index: nil, conditions: .none)
        let large = JournalRecord.upsert(
            collection: "c", id: "i", data: JSONData(canonical: "\"" + String(repeating: "x", count: 20_000) + "\""),
            section: nil, index: nil, conditions: .none)
        let itemOps = JournalRecord.ops(
            collection: "c",
            ops: [
                .insertItems(at: ItemPosition(section: .index(0), index: 0), items: [Item(id: "j")]),
                .moveItem(.id("j"), to: ItemPosition(section: .index(0), index: 1)), .deleteItems([.id("j")]),
                .insertSections(at: 1, sections: [Section(id: "t")]), .updateSection(.id("t"), data: .null),
                .updateItems([Item(id: "i")]),
            ],
            conditions: .none)
        #expect(runsInPlace(upsert))
        #expect(runsInPlace(itemOps))
        let manyOps = (0...LaneRouter.lightOps).map { _ in Op.updateItems([Item(id: "i")]) }
        #expect(!runsInPlace(.ops(collection: "c", ops: manyOps, conditions: .none)))
        #expect(!runsInPlace(upsert, inPlace: false), "a journal that calls back on a thread of others")
        #expect(!runsInPlace(large))
        #expect(!runsInPlace(.ops(collection: "c", ops: [.deleteSections([.index(0)])], conditions: .none)))
        #expect(!runsInPlace(.ops(collection: "c", ops: [.moveSection(.index(0), to: 1)], conditions: .none)))
        #expect(!runsInPlace(.put(collection: "c", epoch: "e", sections: [], conditions: .none)))
        #expect(!runsInPlace(.delete(collection: "c", conditions: .none)))
        #expect(
            !runsInPlace(
                .defineView(
                    view: "w", epoch: "w", definition: JSONData(canonical: #"{"source":"c"}"#), conditions: .none)))
        #expect(
            !runsInPlace(
                .upsert(collection: "many", id: "i", data: .null, section: nil, index: nil, conditions: .none)))

        // A large collection, and one whose lock a reader holds: a read of its snapshot would hold up the syncer.
        let items = (0...LaneRouter.lightItems).map { Item(id: "i\($0)") }
        _ = executor.execute(
            .put(collection: "big", epoch: "e", sections: [Section(id: "s", items: items)], conditions: .none))
        #expect(
            !runsInPlace(.upsert(collection: "big", id: "i", data: .null, section: nil, index: nil, conditions: .none)))
        let entry = try #require(executor.registry.entry("c"))
        entry.whileAnotherThreadHoldsItsLock { #expect(!runsInPlace(upsert)) }
        // The upsert handed to the lane meanwhile may still be finishing there (its lane is busy until it returns,
        // after it said it was done): once the lane is idle again, an upsert runs in place (a full run on two busy
        // cores once found it still busy).
        #expect(waitUntil(timeout: 10) { runsInPlace(upsert) })
    }

    /// Every collection by name, and every view's content by `view:<name>`.
    private static func contents(_ executor: Executor) -> [String: VersionedCollection] {
        Dictionary(
            uniqueKeysWithValues: executor.registry.all().map { ($0.name, $0.content.withLock { $0 }) }
                + executor.views.all().map { ("view:" + $0.name, $0.live.withLock { $0.collection }) })
    }

    private static func expectEqual(
        _ actual: [String: VersionedCollection], _ expected: [String: VersionedCollection], seed: UInt64
    ) {
        #expect(actual.keys.sorted() == expected.keys.sorted(), "seed \(seed)")
        for (name, content) in expected {
            guard let other = actual[name] else { continue }
            #expect(other.version == content.version, "seed \(seed), collection \(name)")
            #expect(other.snapshot() == content.snapshot(), "seed \(seed), collection \(name)")
            let seq = content.version.seq
            let first = Version(epoch: content.version.epoch, seq: seq >= 5 ? seq - 5 : 0)
            #expect(other.changes(since: first) == content.changes(since: first), "seed \(seed), collection \(name)")
        }
    }

    /// None, or `*` in `If-Match` (refused when the view is not there) or `If-None-Match` (refused when it is).
    private static func randomConditions(_ random: inout SplitMix64) -> JournalRecord.Conditions {
        switch Int.random(in: 0..<3, using: &random) {
        case 0: .none
        case 1: JournalRecord.Conditions(ifMatch: "*", ifNoneMatch: nil)
        default: JournalRecord.Conditions(ifMatch: nil, ifNoneMatch: "*")
        }
    }

    private static func randomRecord(_ random: inout SplitMix64) -> JournalRecord {
        let name = names[Int.random(in: 0..<names.count, using: &random)]
        let id = "i\(Int.random(in: 0..<12, using: &random))"
        let data = JSONData(canonical: "\(Int.random(in: 0..<5, using: &random))")
        switch Int.random(in: 0..<24, using: &random) {
        case 0:
            return .delete(collection: name, conditions: .none)
        case 20..<23:
            let view = "v\(Int.random(in: 0..<3, using: &random))"
            let order = Bool.random(using: &random) ? "asc" : "desc"
            let definition =
                #"{"filter":{"field":"","lt":\#(Int.random(in: 1..<6, using: &random))},"#
                + #""sortBy":[{"field":"","order":"\#(order)"}],"source":"\#(name)"}"#
            return .defineView(
                view: view, epoch: "v\(random.next() % 1000)", definition: JSONData(canonical: definition),
                conditions: randomConditions(&random))
        case 23:
            return .deleteView(view: "v\(Int.random(in: 0..<3, using: &random))", conditions: randomConditions(&random))
        case 1..<4:
            let items = (0..<Int.random(in: 0..<6, using: &random)).map { Item(id: "i\($0 * 2)", data: data) }
            let epoch = "e\(random.next() % 1000)"
            return .put(collection: name, epoch: epoch, sections: [Section(id: "s", items: items)], conditions: .none)
        case 4..<7:
            return .ops(collection: name, ops: [.deleteItems([.id(id)])], conditions: .none)
        default:
            return .upsert(collection: name, id: id, data: data, section: nil, index: nil, conditions: .none)
        }
    }
}

/// Copies taken on the lanes' threads.
private final class CapturedContents: @unchecked Sendable {
    // @unchecked: `contents` is guarded by `lock`.
    private let lock = NSLock()
    private var contents: [String: VersionedCollection] = [:]

    func add(_ name: String, _ content: VersionedCollection) {
        lock.withLock { contents[name] = content }
    }

    var all: [String: VersionedCollection] { lock.withLock { contents } }
}
