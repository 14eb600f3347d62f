/// Capped, jittered exponential backoff (for reconnecting: 50 ms doubling up to 2 s), each wait drawn at random
/// between half and all of it, so that servers that lost the database together do not reconnect in step.
struct Backoff: Sendable {
    /// The first wait, and the longest, in milliseconds: a reconnection's by default.
    let first: Int
    let cap: Int
    private var current: Int

    init(first: Int = 50, cap: Int = 2000) {
        self.first = first
        self.cap = cap
        current = first
    }

    /// The next wait in milliseconds.
    mutating func next() -> Int {
        let wait = Int.random(in: (current / 2)...current)
        current = min(current * 2, cap)
        return wait
    }

    mutating func reset() { current = first }
}
