/// Longest increasing subsequences: the elements a diff keeps in place so that only the others move
/// (`docs/changesets.md#rule-4`).
enum LIS {
    /// Marks a heaviest strictly increasing subsequence of `keys` (weights all 1 when `weights` is nil).
    /// Keys must be distinct.
    /// - Returns: for each position, whether it belongs to the subsequence.
    /// - Complexity: O(m log m) for m keys.
    static func members(keys: [Int], weights: [Int]? = nil) -> [Bool] {
        guard !keys.isEmpty else { return [] }
        let previous: [Int]
        let last: Int
        if let weights {
            (previous, last) = heaviest(keys: keys, weights: weights)
        } else {
            (previous, last) = longest(keys: keys)
        }
        var member = [Bool](repeating: false, count: keys.count)
        var index = last
        while index >= 0 {
            member[index] = true
            index = previous[index]
        }
        return member
    }

    /// Patience sorting: `tails[k]` is the position ending the best run of length k + 1 found so far.
    private static func longest(keys: [Int]) -> (previous: [Int], last: Int) {
        var previous = [Int](repeating: -1, count: keys.count)
        var tails: [Int] = []
        tails.reserveCapacity(64)
        for (position, key) in keys.enumerated() {
            // Mostly ordered input mostly extends the longest run: try that before searching.
            if let last = tails.last, keys[last] < key {
                previous[position] = last
                tails.append(position)
                continue
            }
            var low = 0
            var high = tails.count
            while low < high {
                let mid = (low + high) / 2
                if keys[tails[mid]] < key { low = mid + 1 } else { high = mid }
            }
            if low > 0 { previous[position] = tails[low - 1] }
            if low == tails.count { tails.append(position) } else { tails[low] = position }
        }
        return (previous, tails[tails.count - 1])
    }

    /// A Fenwick tree over key ranks holding, for each prefix, the heaviest run ending below that rank. Keys
    /// that are dense non-negative integers are their own ranks; others are ranked by sorting.
    private static func heaviest(keys: [Int], weights: [Int]) -> (previous: [Int], last: Int) {
        var rank: [Int]
        let smallest = keys.min()!
        let span = keys.max()! - smallest + 1
        if span <= 4 * keys.count {
            rank = keys.map { $0 - smallest + 1 }
        } else {
            rank = [Int](repeating: 0, count: keys.count)
            for (r, position) in keys.indices.sorted(by: { keys[$0] < keys[$1] }).enumerated() {
                rank[position] = r + 1
            }
        }
        let size = span <= 4 * keys.count ? span : keys.count
        var treeWeight = [Int](repeating: 0, count: size + 1)
        var treeEnd = [Int](repeating: -1, count: size + 1)
        var previous = [Int](repeating: -1, count: keys.count)
        var best = (weight: -1, end: -1)
        for position in keys.indices {
            var bestBelow = (weight: 0, end: -1)
            var r = rank[position] - 1
            while r > 0 {
                if treeWeight[r] > bestBelow.weight { bestBelow = (treeWeight[r], treeEnd[r]) }
                r &= r - 1
            }
            previous[position] = bestBelow.end
            let total = bestBelow.weight + weights[position]
            if total > best.weight { best = (total, position) }
            r = rank[position]
            while r <= size {
                if total > treeWeight[r] { (treeWeight[r], treeEnd[r]) = (total, position) }
                r += r & -r
            }
        }
        return (previous, best.end)
    }
}
