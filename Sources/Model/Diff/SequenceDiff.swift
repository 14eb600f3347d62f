/// The diff of one sequence (the sections, or the items of one section) between an old and a new version, given
/// the positions of the *touched* elements: every other element is in both versions and keeps its relative order.
///
/// The untouched elements fall into runs that are contiguous in both versions with no touched element between
/// them, and a longest increasing subsequence can always take such a run whole or leave it whole (every other
/// element lies on the same side of all of it). So a heaviest increasing subsequence over the touched survivors
/// (weight 1) and the runs (weight: their length) gives minimal moves while costing what was touched, not the
/// length of the sequence. With nothing untouched this is the plain LIS diff.
struct SequenceDiff {
    /// A touched element: its position in the old version and in the new one, where it is present (stored in
    /// 32 bits each: a full diff has a million of them).
    struct Entry {
        private var storedOld: Int32
        private var storedNew: Int32

        init(old: Int?, new: Int?) {
            storedOld = old.map { Int32($0) } ?? -1
            storedNew = new.map { Int32($0) } ?? -1
        }

        var old: Int? { storedOld < 0 ? nil : Int(storedOld) }
        var new: Int? { storedNew < 0 ? nil : Int(storedNew) }
    }

    /// A run of untouched elements that moves as a whole.
    struct Run {
        var old: Int
        var new: Int
        var count: Int
    }

    /// For each entry present in both versions, whether it moves.
    private(set) var moved: [Bool]
    /// Untouched runs outside the kept subsequence: each of their elements moves.
    private(set) var movedRuns: [Run] = []
    /// Whether nothing is inserted, deleted or moved.
    private(set) var isEmpty: Bool
    /// `old position - rank` of the touched elements present in the old version, sorted: how many untouched
    /// elements come before each of them.
    private let untouchedBeforeOld: [Int]
    private let touchedNew: [Int]

    /// - Parameter preferred: sorted new positions of elements to keep in place rather than others, where a
    ///   subsequence of the same length allows it (the assembler prefers not to move sections whose items changed).
    /// - Complexity: O(k log k) for k entries and preferred positions (O(n) when k is a large part of the n elements).
    init(oldCount: Int, newCount: Int, entries: [Entry], preferred: [Int] = []) {
        let touchedOld = SequenceDiff.sorted(entries.compactMap(\.old), below: oldCount)
        touchedNew = SequenceDiff.sorted(entries.compactMap(\.new), below: newCount)
        untouchedBeforeOld = touchedOld.enumerated().map { $0.element - $0.offset }
        let untouchedBeforeNew = touchedNew.enumerated().map { $0.element - $0.offset }
        let untouched = newCount - touchedNew.count
        precondition(untouched == oldCount - touchedOld.count, "untouched elements differ in number")

        var runs: [Run] = []
        var cuts = SequenceDiff.merged(untouchedBeforeOld, untouchedBeforeNew, bound: untouched)
        cuts.append(untouched)
        var oldShift = 0
        var newShift = 0
        var start = 0
        for cut in cuts {
            if cut > start {
                while oldShift < untouchedBeforeOld.count, untouchedBeforeOld[oldShift] <= start { oldShift += 1 }
                while newShift < untouchedBeforeNew.count, untouchedBeforeNew[newShift] <= start { newShift += 1 }
                runs.append(Run(old: start + oldShift, new: start + newShift, count: cut - start))
            }
            start = cut
        }

        var survivors = entries.indices.filter { entries[$0].old != nil && entries[$0].new != nil }
        survivors = SequenceDiff.sorted(survivors, by: { entries[$0].new! }, below: newCount)
        // When the untouched elements are few, treating them one by one lets the faster unweighted LIS run.
        if preferred.isEmpty, !runs.isEmpty, untouched <= 2 * survivors.count {
            runs = runs.flatMap { run in (0..<run.count).map { Run(old: run.old + $0, new: run.new + $0, count: 1) } }
        }
        var keys: [Int] = []
        var weights: [Int] = []
        keys.reserveCapacity(survivors.count + runs.count)
        var nextRun = 0
        var order: [Int] = []  // >= 0: a survivor entry; < 0: run -1 - order
        order.reserveCapacity(survivors.count + runs.count)
        weights.reserveCapacity(survivors.count + runs.count)
        for entry in survivors {
            while nextRun < runs.count, runs[nextRun].new < entries[entry].new! {
                order.append(-1 - nextRun)
                nextRun += 1
            }
            order.append(entry)
        }
        order.append(contentsOf: (nextRun..<runs.count).map { -1 - $0 })
        let scale = preferred.count + 1
        for element in order {
            if element >= 0 {
                let new = entries[element].new!
                keys.append(entries[element].old!)
                weights.append(
                    scale + SequenceDiff.count(of: preferred, below: new + 1)
                        - SequenceDiff.count(of: preferred, below: new))
            } else {
                let run = runs[-1 - element]
                keys.append(run.old)
                let bonus =
                    SequenceDiff.count(of: preferred, below: run.new + run.count)
                    - SequenceDiff.count(of: preferred, below: run.new)
                weights.append(run.count * scale + bonus)
            }
        }
        let kept = LIS.members(keys: keys, weights: weights.allSatisfy { $0 == 1 } ? nil : weights)
        moved = [Bool](repeating: false, count: entries.count)
        var anyMove = false
        for (position, element) in order.enumerated() where !kept[position] {
            anyMove = true
            if element >= 0 { moved[element] = true } else { movedRuns.append(runs[-1 - element]) }
        }
        isEmpty = !anyMove && survivors.count == entries.count
    }

    /// The old position of the untouched element now at `new`.
    /// - Complexity: O(log k).
    func oldIndex(ofUntouchedAt new: Int) -> Int {
        let rank = new - SequenceDiff.count(of: touchedNew, below: new)
        return rank + SequenceDiff.count(of: untouchedBeforeOld, below: rank + 1)
    }

    /// How many elements of the sorted `values` are below `bound`.
    private static func count(of values: [Int], below bound: Int) -> Int {
        var low = 0
        var high = values.count
        while low < high {
            let mid = (low + high) / 2
            if values[mid] < bound { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// The union of two sorted arrays, sorted, without repeats.
    private static func merged(_ a: [Int], _ b: [Int], bound: Int) -> [Int] {
        var result: [Int] = []
        result.reserveCapacity(a.count + b.count)
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            let next = j == b.count || (i < a.count && a[i] <= b[j]) ? a[i] : b[j]
            if i < a.count, a[i] == next { i += 1 }
            if j < b.count, b[j] == next { j += 1 }
            if next < bound, result.last != next { result.append(next) }
        }
        return result
    }

    /// Distinct positions in `0..<bound`, sorted: as they are when they already are, by buckets when they are many,
    /// by comparison otherwise.
    private static func sorted(_ positions: [Int], below bound: Int) -> [Int] {
        sorted(positions, by: { $0 }, below: bound)
    }

    private static func sorted(_ elements: [Int], by position: (Int) -> Int, below bound: Int) -> [Int] {
        if zip(elements, elements.dropFirst()).allSatisfy({ position($0) < position($1) }) { return elements }
        guard elements.count > 64, elements.count > bound / 8 else {
            return elements.sorted { position($0) < position($1) }
        }
        var buckets = [Int](repeating: -1, count: bound)
        for element in elements { buckets[position(element)] = element }
        return buckets.filter { $0 >= 0 }
    }
}
