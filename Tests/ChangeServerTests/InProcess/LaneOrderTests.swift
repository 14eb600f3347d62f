import Dispatch
import Foundation
import Model
import Testing

@testable import ChangeServer

/// Collections commit independently: records applied on their collections' lanes, in parallel, leave every
/// collection exactly as applying them one by one in journal order does (which is what recovery does), and a
/// snapshot taken at a consistent point sees exactly the records handed in before it.
@Suite struct LaneOrderTests {
    private static let names = ["a", "b", "c", "d"]

    @Test(arguments: 0..<20)
    func parallelLanesEqualJournalOrder(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let records = (0..<300).map { _ in Self.randomRecord(&random) }
        let cut = Int.random(in: 0..<records.count, using: &random)

        let sequential = Executor(registry: Registry(), limits: HistoryLimits(versions: 50))
        var accepted = 0
        var atCut: [String: VersionedCollection] = [:]
        for (index, record) in records.enumerated() {
            if index == cut { atCut = Self.contents(sequential.registry) }
            if case .committed = sequential.execute(record) { accepted += 1 }
        }

        let parallel = Executor(registry: Registry(), limits: HistoryLimits(versions: 50))
        let lanes = Lanes()
        let group = DispatchGroup()
        let captured = CapturedContents()
        for (index, record) in records.enumerated() {
            if index == cut {
                group.enter()
                lanes.visitAtConsistentPoint(
                    names: { parallel.registry.all().map(\.name) },
                    visit: { name in
                        if let entry = parallel.registry.entry(name) {
                            captured.add(name, entry.content.withLock { $0 })
                        }
                    },
                    then: { group.leave() })
            }
            group.enter()
            lanes.run(record.collection) {
                _ = parallel.execute(record)
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 30) == .success)

        #expect(accepted >= 100, "seed \(seed): only \(accepted) of \(records.count) records committed")
        Self.expectEqual(Self.contents(parallel.registry), Self.contents(sequential.registry), seed: seed)
        Self.expectEqual(captured.all, atCut, seed: seed)
    }

    private static func contents(_ registry: Registry) -> [String: VersionedCollection] {
        Dictionary(uniqueKeysWithValues: registry.all().map { ($0.name, $0.content.withLock { $0 }) })
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

    private static func randomRecord(_ random: inout SplitMix64) -> JournalRecord {
        let name = names[Int.random(in: 0..<names.count, using: &random)]
        let id = "i\(Int.random(in: 0..<12, using: &random))"
        let data = JSONData(canonical: "\(Int.random(in: 0..<5, using: &random))")
        switch Int.random(in: 0..<20, using: &random) {
        case 0:
            return .delete(collection: name, conditions: .none)
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
