import Model

/// `Bench diff`: full diffs of whole snapshots, against Swift's `difference(from:).inferringMoves()`.
enum DiffBench {
    /// - Parameter filter: when given, only the inputs whose name contains it.
    static func run(filter: String?) {
        print("input                 | median ms | cpu ms  | moves | minimal | peak MiB | baseline ms | baseline moves")
        print("----------------------|-----------|---------|-------|---------|----------|-------------|---------------")
        for (index, (name, make)) in DiffInput.all.enumerated() where filter.map(name.contains) ?? true {
            Measure.resetPeakMemory()
            var generator = SeededGenerator(seed: 42 + UInt64(index))
            let input = make(&generator)
            let repetitions = input.old.reduce(0) { $0 + $1.items.count } > 200_000 ? 5 : 11
            let (ms, cpu, changeset) = Measure.median(repetitions) {
                try! Changeset.diff(from: input.old, to: input.new, versions: (version(1), version(2)))
            }
            let peak = Measure.peakMemoryMiB()
            let baseline = Baseline.run(input)
            print(
                [
                    input.name.padding(21), format(ms).padding(9, left: true), format(cpu).padding(7, left: true),
                    "\(changeset.items.moved.count + changeset.sections.moved.count)".padding(5, left: true),
                    "\(minimalMoves(input, changeset))".padding(7, left: true), format(peak).padding(8, left: true),
                    baseline.time.padding(11, left: true), baseline.moves.padding(14, left: true),
                ].joined(separator: " | "))
            if input.name.contains("churn") { replaceRow(input) }
        }
    }

    /// The whole `PUT` path on the same input: `VersionedCollection.replace`, which diffs and rebuilds the store.
    static func replaceRow(_ input: DiffInput) {
        Measure.resetPeakMemory()
        var times: [(Double, Double)] = []
        var changeset = Changeset(from: version(1), to: version(1))
        for _ in 0..<3 {
            var collection = try! VersionedCollection(epoch: "bench", sections: input.old)
            let (ms, cpu, result) = Measure.median(1) { try! collection.replace(with: input.new) }
            times.append((ms, cpu))
            changeset = result
        }
        times.sort { $0.0 < $1.0 }
        print(
            [
                "  as replace (PUT)".padding(21), format(times[1].0).padding(9, left: true),
                format(times[1].1).padding(7, left: true), "\(changeset.items.moved.count)".padding(5, left: true),
                "".padding(7), format(Measure.peakMemoryMiB()).padding(8, left: true), "n/a".padding(11, left: true),
                "".padding(14),
            ].joined(separator: " | "))
    }

    static func version(_ seq: UInt64) -> Version { Version(epoch: "bench", seq: seq) }

    /// The moves `docs/changesets.md#rule-4` allows, counted independently of Model: survivors minus a longest
    /// increasing subsequence, for the sections (leaving out those the changeset rebuilds, as `#rule-3`
    /// requires) and for the items staying in each section that stays; plus one per item changing between two
    /// such sections.
    static func minimalMoves(_ input: DiffInput, _ changeset: Changeset) -> Int {
        let rebuilt = Set(changeset.sections.deleted.map(\.id)).intersection(
            changeset.sections.inserted.map(\.section.id))
        let oldIndex = Dictionary(uniqueKeysWithValues: input.old.enumerated().map { ($1.id, $0) })
        let survivors = input.new.compactMap { oldIndex[$0.id] }.filter { !rebuilt.contains(input.old[$0].id) }
        var total = survivors.count - lisLength(survivors)
        let moved = Set(changeset.sections.moved.map(\.id))
        let live = Set(
            input.new.map(\.id).filter { oldIndex[$0] != nil && !rebuilt.contains($0) && !moved.contains($0) })
        var oldPlace: [String: (section: String, index: Int)] = [:]
        for section in input.old {
            for (index, item) in section.items.enumerated() { oldPlace[item.id] = (section.id, index) }
        }
        for section in input.new where live.contains(section.id) {
            var stay: [Int] = []
            for item in section.items {
                guard let place = oldPlace[item.id] else { continue }
                if place.section == section.id {
                    stay.append(place.index)
                } else if live.contains(place.section) {
                    total += 1
                }
            }
            total += stay.count - lisLength(stay)
        }
        return total
    }
}

/// Swift's own diff, where it finishes within the minute (its Myers core is O(n·d) in time and space).
enum Baseline {
    static func run(_ input: DiffInput) -> (time: String, moves: String) {
        guard input.old.count == 1, input.new.count == 1 else { return ("n/a", "(sections)") }
        let old = input.old[0].items.map(\.id)
        let new = input.new[0].items.map(\.id)
        let differences = old.count + new.count - 2 * Set(old).intersection(new).count
        // Measured here: 100k items with 20k differences (4e9 by this estimate) take about 17 s.
        let estimate = (old.count + new.count) * max(differences, 1)
        guard estimate <= 12_000_000_000 else { return ("skipped", "(> 1 min)") }
        let (ms, _, moves) = Measure.median(estimate > 1_000_000_000 ? 1 : 3) {
            new.difference(from: old).inferringMoves().reduce(0) { count, change in
                if case .insert(_, _, let associated?) = change { count + (associated >= 0 ? 1 : 0) } else { count }
            }
        }
        return (format(ms), "\(moves)")
    }
}

func format(_ value: Double) -> String {
    let scaled = Int((value * 100).rounded())
    let fraction = scaled % 100
    return "\(scaled / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

extension String {
    func padding(_ width: Int, left: Bool = false) -> String {
        let pad = String(repeating: " ", count: max(0, width - count))
        return left ? pad + self : self + pad
    }
}
