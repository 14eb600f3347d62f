import ChangeFeedClient
import Foundation
import Model

/// Applying a changeset of 10,000 entries (2,500 each of item deletes, inserts, moves and updates) to a mirror
/// of 1,000,000 items and building its update value; the changesets come from Model's diff, alternately
/// forward and back, so each run starts from the state the last one left. Baseline: copying the mirror's
/// 1,000,000 items once, the least an O(n) mirror pays per changeset.
enum ApplyBench {
    static func run() {
        print("== apply: 10,000-entry changeset on a 1,000,000-item mirror, with its update value")
        for (sections, perSection) in [(1, 1_000_000), (1000, 1000)] {
            measure(sections: sections, perSection: perSection)
        }
    }

    static func measure(sections sectionCount: Int, perSection: Int) {
        var random = SystemRandomNumberGenerator()
        var next = 0
        func freshItem() -> Item {
            next += 1
            return Item(id: "i\(next)", data: JSONData(canonical: "{\"n\":\(next)}"))
        }
        let before = (0..<sectionCount).map { s in
            Section(id: "s\(s)", items: (0..<perSection).map { _ in freshItem() })
        }
        var after = before
        func randomPath() -> (Int, Int) {
            let s = Int.random(in: 0..<after.count, using: &random)
            return (s, Int.random(in: 0..<after[s].items.count, using: &random))
        }
        for _ in 0..<2500 {
            let (s, i) = randomPath()
            after[s].items.remove(at: i)
        }
        for _ in 0..<2500 {
            let (s, i) = randomPath()
            after[s].items.insert(freshItem(), at: i)
        }
        for _ in 0..<2500 {
            let (s, i) = randomPath()
            let item = after[s].items.remove(at: i)
            let (t, j) = randomPath()
            after[t].items.insert(item, at: j)
        }
        for _ in 0..<2500 {
            let (s, i) = randomPath()
            after[s].items[i].data = JSONData(canonical: "{\"edited\":\(i)}")
        }
        let epoch = "bench"
        do {
            let forward = try Changeset.diff(
                from: before, to: after, versions: (Version(epoch: epoch, seq: 1), Version(epoch: epoch, seq: 2)))
            let back = try Changeset.diff(
                from: after, to: before, versions: (Version(epoch: epoch, seq: 2), Version(epoch: epoch, seq: 3)))
            let entries = [forward, back].map {
                $0.items.deleted.count + $0.items.inserted.count + $0.items.moved.count + $0.items.updated.count
            }
            var live = try LiveCollection(
                Snapshot(name: "bench", version: Version(epoch: epoch, seq: 1), sections: before))
            var seq: UInt64 = 1
            var times: [(wall: Double, cpu: Double)] = []
            for _ in 0..<15 {
                var changeset = forward
                changeset.from = Version(epoch: epoch, seq: seq)
                changeset.to = Version(epoch: epoch, seq: seq + 1)
                times.append(try Timing.medians(1) { consume(try live.apply(.changes(changeset))) })
                var reverse = back
                reverse.from = Version(epoch: epoch, seq: seq + 1)
                reverse.to = Version(epoch: epoch, seq: seq + 2)
                times.append(try Timing.medians(1) { consume(try live.apply(.changes(reverse))) })
                seq += 2
            }
            guard live.sections == before else {
                print("  the mirror does not return to its start: the benchmark is wrong")
                exit(1)
            }
            let items = before.flatMap(\.items)
            let baseline = Timing.medians(15) { consume(items.map { $0 }) }
            let wall = times.map(\.wall).sorted()[times.count / 2]
            let cpu = times.map(\.cpu).sorted()[times.count / 2]
            print(
                "  \(sectionCount) section(s) x \(perSection) items, \(entries[0]) / \(entries[1]) entries: "
                    + "apply + update median \(Timing.format(wall)) wall, \(Timing.format(cpu)) CPU (target <= 5 ms); "
                    + "baseline, copying the 1M items: \(Timing.format(baseline.wall)) wall, "
                    + "\(Timing.format(baseline.cpu)) CPU; ratio \(String(format: "%.2f", wall / baseline.wall))")
        } catch {
            print("  failed: \(error)")
            exit(1)
        }
    }
}
