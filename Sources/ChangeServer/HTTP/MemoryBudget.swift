import Synchronization

/// Bytes held in memory by all event loops together for one purpose, bounded: request bodies as they arrive
/// (`--max-body-memory`) or large answers until they are sent (`--max-response-memory`, `ResponseBytes`).
///
/// A body reserves its bytes as they arrive and gives them back when its request completes, or as soon as it runs
/// out of room. A request whose announced `Content-Length` does not fit in what is free when its headers arrive is
/// refused from them (`503`: at once to a client that waits for `100 Continue`, else once its body has been read
/// and discarded), and so is one that runs out of room midway. Reserving the announced length up front instead let
/// a client that announced a large body and sent nothing hold that memory: 16 such requests of 16 MiB took the
/// default 256 MiB, and every write with a body got `503` until their connections timed out.
final class MemoryBudget: Sendable {
    let limit: Int
    private let used = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// Reserves `bytes` if they fit under the limit; `orAlone`: also when nothing else is reserved, so that one
    /// thing larger than the whole limit (an answer of a collection that grew past it) can still go, by itself.
    /// - Complexity: O(1), lock-free.
    func reserve(_ bytes: Int, orAlone: Bool = false) -> Bool {
        var current = used.load(ordering: .relaxed)
        while true {
            guard current + bytes <= limit || (orAlone && current == 0) else { return false }
            let (exchanged, original) = used.compareExchange(
                expected: current, desired: current + bytes, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
    }

    /// Whether `bytes` fit under the limit now (nothing is reserved).
    func hasRoom(for bytes: Int) -> Bool {
        used.load(ordering: .relaxed) + bytes <= limit
    }

    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.subtract(bytes, ordering: .acquiringAndReleasing)
    }

    /// Bytes reserved right now.
    var inUse: Int { used.load(ordering: .relaxed) }
}
