import Model

/// `Bench ops`: one op applied with `apply` to a 1,000,000-item collection (one section, and 1,000 sections of
/// 1,000), median per op; then the feed's coalesced changeset over the last 1,000 versions.
enum OpsBench {
    static func run() {
        print("collection          | op      | median µs | p99 µs | peak MiB")
        print("--------------------|---------|-----------|--------|---------")
        for (name, sections) in [("1 x 1M", 1), ("1k x 1k", 1_000)] {
            Measure.resetPeakMemory()
            var generator = SeededGenerator(seed: 7)
            let perSection = 1_000_000 / sections
            let content = (0..<sections).map { s in
                Section(id: "s\(s)", items: (0..<perSection).map { Item(id: "s\(s)i\($0)") })
            }
            var collection = try! VersionedCollection(epoch: "bench", sections: content)
            var serial = 0
            let kinds = ["insert", "delete", "move", "update"]
            for kind in kinds {
                var times: [Double] = []
                for _ in 0..<2_000 {
                    let op = randomOp(kind, in: collection, sections: sections, serial: &serial, generator: &generator)
                    let clock = ContinuousClock()
                    let start = clock.now
                    let changeset = try! collection.apply([op])
                    times.append(Measure.milliseconds(clock.now - start) * 1000)
                    precondition(!changeset.isEmpty)
                }
                times.sort()
                print(
                    [
                        name.padding(19), kind.padding(7), format(times[times.count / 2]).padding(9, left: true),
                        format(times[times.count * 99 / 100]).padding(6, left: true),
                        format(Measure.peakMemoryMiB()).padding(8, left: true),
                    ].joined(separator: " | "))
            }
            let since = Version(epoch: "bench", seq: collection.version.seq - 1_000)
            let (ms, _, changeset) = Measure.median(5) { collection.changes(since: since)! }
            print(
                [
                    name.padding(19), "feed".padding(7), format(ms * 1000).padding(9, left: true), "".padding(6),
                    format(Measure.peakMemoryMiB()).padding(8, left: true),
                ].joined(separator: " | ")
                    + "  (one changeset over the last 1,000 versions: \(count(changeset)) entries)")
        }
    }

    static func count(_ changeset: Changeset) -> Int {
        changeset.items.deleted.count + changeset.items.inserted.count + changeset.items.moved.count
            + changeset.items.updated.count
    }

    static func randomOp(
        _ kind: String, in collection: VersionedCollection, sections: Int, serial: inout Int,
        generator: inout SeededGenerator
    ) -> Op {
        let section = Int.random(in: 0..<sections, using: &generator)
        let snapshotCount = collection.itemCount / sections
        let index = Int.random(in: 0..<max(snapshotCount - 2, 1), using: &generator)
        serial += 1
        switch kind {
        case "insert":
            return .insertItems(
                at: ItemPosition(section: .index(section), index: index), items: [Item(id: "new\(serial)")])
        case "delete":
            // Deletes the items the inserts added, so that the updates always find the original ones.
            return .deleteItems([.id("new\(serial - 2_000)")])
        case "move":
            let target = Int.random(in: 0..<sections, using: &generator)
            return .moveItem(.path(.index(section), index), to: ItemPosition(section: .index(target), index: index / 2))
        default:
            let item = "s\(section)i\(Int.random(in: 0..<1_000_000 / sections, using: &generator))"
            return .updateItems([Item(id: item, data: JSONData(canonical: "\(serial)"))])
        }
    }
}
