import Synchronization

/// The bytes of request bodies held in memory by all event loops together, bounded by `--max-body-memory`. A
/// request reserves its announced `Content-Length` when its headers arrive (a chunked body reserves as it comes)
/// and gives it back when it completes; a request that cannot reserve gets `503` and its body is never buffered.
final class BodyBudget: Sendable {
    let limit: Int
    private let used = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// Reserves `bytes` if they fit under the limit.
    /// - Complexity: O(1), lock-free.
    func reserve(_ bytes: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while true {
            guard current + bytes <= limit else { return false }
            let (exchanged, original) = used.compareExchange(
                expected: current, desired: current + bytes, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
    }

    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.subtract(bytes, ordering: .acquiringAndReleasing)
    }

    /// Bytes reserved right now.
    var inUse: Int { used.load(ordering: .relaxed) }
}
