extension Array {
    /// The first index whose element satisfies `belongsToSecondPart`, for an array partitioned by it.
    /// - Complexity: O(log n)
    func partitioningIndex(where belongsToSecondPart: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = low + (high - low) / 2
            if belongsToSecondPart(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
