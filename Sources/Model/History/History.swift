/// The change logs of a collection's recent mutations, oldest first: enough to walk back from the current
/// state to any kept version, without keeping a copy of any old state.
struct History: Sendable {
    struct Entry: Sendable {
        /// The version this mutation committed; it started from the version before.
        var version: Version
        var changes: [Change]
        var byteCount: Int
    }

    private(set) var entries: [Entry] = []
    private(set) var head = 0
    private(set) var byteCount = 0

    /// Records the mutation that committed `version`, then drops the oldest ones beyond `limits`.
    /// - Complexity: O(k) for k changes, amortized O(1) per dropped entry.
    mutating func record(_ changes: [Change], committing version: Version, limits: HistoryLimits) {
        let bytes = changes.reduce(64) { $0 + $1.byteCount }
        entries.append(Entry(version: version, changes: changes, byteCount: bytes))
        byteCount += bytes
        trim(to: limits)
    }

    /// Drops the oldest entries until at most `limits.versions` remain within `limits.bytes`.
    mutating func trim(to limits: HistoryLimits) {
        while head < entries.count, entries.count - head > max(limits.versions, 0) || byteCount > limits.bytes {
            byteCount -= entries[head].byteCount
            entries[head].changes = []
            head += 1
        }
        if head > 64, head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// The kept entries after `version`, oldest first: nil when `version` is older than the kept history.
    /// - Precondition: `version` is of the current epoch and not ahead of `current`.
    /// - Complexity: O(1).
    func entries(after version: Version, current: Version) -> ArraySlice<Entry>? {
        let kept = entries.count - head
        guard version.seq <= current.seq, current.seq - version.seq <= UInt64(kept) else { return nil }
        return entries[(entries.count - Int(current.seq - version.seq))...]
    }
}
